#!/usr/bin/env bash
# What one file-system call costs per layer of the FULL tier, side by side
# in one run: bare, bubblewrap (namespaces and mounts), a Landlock domain
# alone (benches/fs_cost.rs) handling every file right or only those a
# mount view cannot refuse (`landlock-tree`), and vetto at FULL with creations checked
# after the session, at FULL and at FS-ONLY. Then `git add -A` of 2,000
# files the same ways: the command as a whole, and git alone (timed inside
# the wrapper). Rounds interleave the wrappers, so a loaded machine hurts
# all alike; medians.
#
#   benches/fs_cost.sh       # builds --release; as root measures as `tester`
#   BENCH_ROUNDS=9 BENCH_DIR=/mnt/tmpfs benches/fs_cost.sh  # a tmpfs of your own
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_vetto
bench=$(cd "$repo" && cargo bench --bench fs_cost --no-run 2>&1 |
    sed -n 's/.*Executable .*(\(.*fs_cost-[0-9a-f]*\)).*/\1/p' | tail -1)
[[ -n $bench ]] || { echo "cannot build benches/fs_cost.rs" >&2; exit 1; }
# BENCH_DIR: where the project is made (default /tmp; a tmpfs keeps the
# disk out of the figures).
bench_scratch "${BENCH_DIR:-/tmp}/vetto-fscost.XXXXXX"
p="$scratch/project"
mkdir -p "$p/.bench" "$p/src"
for i in $(seq 2000); do echo "file $i" >"$p/src/f$i.txt"; done
git -C "$p" init -q
printf '.bench/\nfs-cost-*\n' >"$p/.gitignore"
# Inside the project: the one place every wrapper shows the job.
cp "$repo/$bench" "$p/.bench/fs_cost"
bench_as_user
v="$scratch/vetto"
b="$p/.bench/fs_cost"
wrappers=(bare landlock landlock-tree vetto-full-after vetto-full vetto-fs-only)
command -v bwrap >/dev/null && wrappers+=(bwrap)
# `wrap W CMD…`: CMD as wrapper W runs it.
wrap() {
    local w=$1
    shift
    case $w in
        bare) "$@" ;;
        bwrap) bwrap --unshare-all --die-with-parent --ro-bind / / --dev /dev --proc /proc \
            --tmpfs /tmp --bind "$p" "$p" "$@" ;;
        landlock) "$b" landlock "$p" -- "$@" ;;
        landlock-tree) "$b" landlock-tree "$p" -- "$@" ;;
        vetto-full-after) "$v" run --tier full --check-creations after -- "$@" ;;
        vetto-full) "$v" run --tier full -- "$@" ;;
        vetto-fs-only) "$v" run --tier fs-only -- "$@" ;;
    esac
}
run() { wrap "$1" "$b" loops "$p"; }
# `git add -A`, timed inside the wrapper too: "wall job" in milliseconds.
git_add() {
    local t0=$EPOCHREALTIME
    wrap "$1" bash -c "$timed" |
        { read -r job; echo "$(( (${EPOCHREALTIME/./} - ${t0/./}) / 1000 )) $job"; }
}
timed='s=$EPOCHREALTIME; git add -A; e=$EPOCHREALTIME; echo $(( (${e/./} - ${s/./}) / 1000 ))'
export -f wrap run git_add
export b p v timed
cd "$p"
out="$scratch/rows.tsv"
for round in $(seq 0 "${BENCH_ROUNDS:-5}"); do
    for w in $(printf '%s\n' "${wrappers[@]}" | shuf); do
        [[ $round == 0 ]] && to=/dev/null || to=$out
        "${as_user[@]}" bash -c "run $w" 2>"$scratch/err" | sed "s/^/$w\t/" >>"$to" || { cat "$scratch/err" >&2; exit 1; }
    done
done
adds="$scratch/git-add.tsv"
# Round 0 warms the caches and is not counted.
for round in $(seq 0 $(( ${BENCH_ROUNDS:-5} * 4 ))); do
    for w in $(printf '%s\n' "${wrappers[@]}" | shuf); do
        rm -rf .git/index .git/objects/??
        [[ $round == 0 ]] && to=/dev/null || to=$adds
        "${as_user[@]}" bash -c "git_add $w" 2>"$scratch/err" | sed "s/^/$w /" >>"$to" ||
            { cat "$scratch/err" >&2; exit 1; }
    done
done
python3 - "$out" "$adds" "${wrappers[@]}" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
adds = [l.split() for l in open(sys.argv[2]) if l.strip()]
wrappers = sys.argv[3:]
ops = list(dict.fromkeys(r[1] for r in rows))
med = {(w, o): statistics.median(float(r[2]) for r in rows if r[0] == w and r[1] == o)
       for w in wrappers for o in ops if any(r[0] == w and r[1] == o for r in rows)}
print("| call | " + " | ".join(wrappers) + " |")
print("|---|" + "---:|" * len(wrappers))
for o in ops:
    bare = med.get(("bare", o))
    cells = []
    for w in wrappers:
        m = med.get((w, o))
        if m is None:
            cells.append("—")
        elif w == "bare" or not bare:
            cells.append(f"{m:.0f} ns")
        else:
            cells.append(f"{m:.0f} ns ({m - bare:+.0f})")
    print(f"| {o} | " + " | ".join(cells) + " |")
print()
print(f"`git add -A` of 2,000 files, {len(adds) // len(wrappers)} rounds, medians:")
print()
print("| | " + " | ".join(wrappers) + " |")
print("|---|" + "---:|" * len(wrappers))
for col, what in ((1, "the command"), (2, "git alone")):
    m = {w: statistics.median(int(a[col]) for a in adds if a[0] == w) for w in wrappers}
    print(f"| {what} | " + " | ".join(
        f"{m[w]} ms" + ("" if w == "bare" else f" (×{m[w] / m['bare']:.2f})") for w in wrappers) + " |")
PY
