#!/usr/bin/env bash
# Startup overhead of vetto against bare /bin/true and bubblewrap, side by
# side in one run of this script, plus `vetto doctor` and the in-process time
# of the probe `vetto run` makes at every start.
#
# hyperfine measures its commands one after the other, and on a shared
# machine the load changes in between. So the run is split into BENCH_ROUNDS
# hyperfine rounds over all commands, and each row's figures are computed
# over the times of all rounds: a busy minute weighs on every row alike.
#
#   benches/startup.sh                            # build --release (static), measure
#   VETTO=/path/to/vetto benches/startup.sh       # measure a given binary
#   BENCH_ROUNDS=5 BENCH_RUNS=100 BENCH_WARMUP=20 benches/startup.sh  # runs per round
#   BENCH_USER=tester benches/startup.sh          # who measures when run by root
#   BENCH_FILES=100000 benches/startup.sh         # files in the large project (0: none)
#
# Besides the empty project, a project of BENCH_FILES files (10 top-level
# directories × 100 subdirectories × 99 files, made once) is measured warm
# (vetto's walk cache in place, as from the second session on) and on a
# first run (the walk cache removed before every run by hyperfine's
# --prepare; the kernel's own caches stay warm, as on a developer's
# machine).
#
# Run as root, it measures as the unprivileged BENCH_USER (created when
# missing), as users and CI jobs run vetto. Needs hyperfine, bubblewrap and
# python3; as root it installs them with apt-get when missing.
#
# Output in target/bench/:
#   startup.json   hyperfine's --export-json format, the rounds merged
#   round-N.json   each round as hyperfine exported it (round-N.txt: its text)
#   startup.md     the Markdown table for docs/benchmarks.md
#   doctor.json    `vetto doctor --json` of the host measured on
#   probe.txt      in-process probe timing
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$repo/target/bench"
rounds=${BENCH_ROUNDS:-5}
runs=${BENCH_RUNS:-100}
warmup=${BENCH_WARMUP:-20}
bench_user=${BENCH_USER:-tester}
files=${BENCH_FILES:-100000}
mkdir -p "$out"

say() { printf 'startup.sh: %s\n' "$*" >&2; }

# ---- tools ------------------------------------------------------------------
need_pkgs=()
command -v hyperfine >/dev/null || need_pkgs+=(hyperfine)
command -v bwrap >/dev/null || need_pkgs+=(bubblewrap)
command -v python3 >/dev/null || need_pkgs+=(python3)
if ((${#need_pkgs[@]})); then
    if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
        say "installing ${need_pkgs[*]}"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
    else
        say "missing: ${need_pkgs[*]}; install them, e.g.: sudo apt-get install -y ${need_pkgs[*]}"
        exit 2
    fi
fi

# ---- the binary ---------------------------------------------------------------
# Statically linked, as action.yml installs it: without the dynamic loader
# each of the two vetto processes a session starts (the supervisor and the
# stage) begins ≈0.4 ms sooner. `--target` keeps the flag off the build
# scripts and proc macros, which cannot be static.
if [[ -z ${VETTO:-} ]]; then
    host=$(rustc -vV | sed -n 's/^host: //p')
    say "cargo build --release --target $host (crt-static)"
    (cd "$repo" && RUSTFLAGS="-C target-feature=+crt-static" \
        cargo build --release --quiet --target "$host")
    VETTO="$repo/target/$host/release/vetto"
fi
[[ -x $VETTO ]] || { say "no executable vetto at $VETTO"; exit 2; }

# ---- who measures -------------------------------------------------------------
# Everything the measuring user touches lives in a scratch directory it owns:
# a copy of the binary, a project to run in, hyperfine's exports.
scratch=$(mktemp -d /tmp/vetto-bench.XXXXXX)
trap 'rm -rf "$scratch"' EXIT
cp "$VETTO" "$scratch/vetto"
mkdir -p "$scratch/project" "$scratch/home" "$scratch/cache"
if ((files > 0)); then
    say "making a project of $files files"
    python3 - "$scratch/big" "$files" <<'PY'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per = max(1, -(-n // 1000))
made = 0
for a in range(10):
    for b in range(100):
        d = os.path.join(root, f"src{a}", f"mod{b}")
        os.makedirs(d, exist_ok=True)
        for c in range(per):
            if made == n:
                break
            open(os.path.join(d, f"file{c}.rs"), "w").close()
            made += 1
PY
fi
as_user=()
if [[ $(id -u) == 0 ]]; then
    if ! id "$bench_user" >/dev/null 2>&1; then
        say "creating unprivileged user $bench_user"
        useradd --create-home --shell /bin/sh "$bench_user"
    fi
    chown -R "$bench_user:" "$scratch"
    chmod 755 "$scratch"
    as_user=(runuser -u "$bench_user" -- env -i "HOME=$scratch/home" "USER=$bench_user"
        "XDG_CACHE_HOME=$scratch/cache" "PATH=/usr/local/bin:/usr/bin:/bin" "TMPDIR=/tmp")
    say "measuring as $bench_user (uid $(id -u "$bench_user"))"
else
    say "measuring as $(id -un) (uid $(id -u))"
    export XDG_CACHE_HOME="$scratch/cache"
fi
run_as() { (cd "$scratch/project" && "${as_user[@]}" "$@"); }

v="$scratch/vetto"
proj="$scratch/project"

# ---- the host -----------------------------------------------------------------
run_as "$v" doctor --json >"$out/doctor.json" 2>/dev/null || say "vetto doctor --json failed"

# ---- which commands run -------------------------------------------------------
# A command that fails here (a tier the host or this vetto version cannot
# run yet) is left out of the hyperfine rounds and reported, not measured.
names=()
cmds=()
preps=()
skipped=()
# The walk cache, removed before each run of a "first run" row.
forget="rm -rf $scratch/cache/vetto/walk"
add() { # NAME COMMAND...
    add_prepared true "$@"
}
add_prepared() { # PREPARE NAME COMMAND...
    local prep=$1 name=$2
    shift 2
    local err status=0
    err=$(run_as "$@" 2>&1 >/dev/null) || status=$?
    if ((status == 0)); then
        names+=("$name")
        cmds+=("$(printf '%q ' "$@")")
        preps+=("$prep")
    else
        err=$(printf '%s' "$err" | tr '\n' ' ' | cut -c1-160)
        skipped+=("$name|exit $status: $err")
        say "not measured: $name (exit $status): $err"
    fi
}
add "bare" /bin/true
add "vetto fs-only" "$v" run --tier fs-only --project "$proj" -- /bin/true
add "vetto full" "$v" run --tier full --project "$proj" -- /bin/true
if ((files > 0)); then
    big="$scratch/big"
    for t in fs-only full; do
        add "vetto $t, $files files, warm" "$v" run --tier $t --project "$big" -- /bin/true
        add_prepared "$forget" "vetto $t, $files files, first run" \
            "$v" run --tier $t --project "$big" -- /bin/true
    done
fi
add "bwrap ro-bind" bwrap --ro-bind / / /bin/true
add "bwrap unshare-all" bwrap --unshare-all --die-with-parent --ro-bind / / /bin/true
# bubblewrap doing work comparable to vetto's FULL tier with the default
# policy: all namespaces, a root built from the same system paths, the
# project writable, fresh /proc, minimal /dev, private /tmp, no capabilities
# (it has no Landlock and no seccomp filter here: vetto does more).
comparable=(bwrap --unshare-all --die-with-parent --cap-drop ALL)
for d in /usr /etc /opt /sys /var/lib; do
    [[ -d $d ]] && comparable+=(--ro-bind "$d" "$d")
done
for l in /bin /sbin /lib /lib64 /lib32 /libx32; do
    if [[ -L $l ]]; then
        comparable+=(--symlink "$(readlink "$l")" "$l")
    elif [[ -d $l ]]; then
        comparable+=(--ro-bind "$l" "$l")
    fi
done
comparable+=(--proc /proc --dev /dev --tmpfs /tmp --bind "$proj" "$proj" --chdir "$proj" /bin/true)
add "bwrap comparable" "${comparable[@]}"
add "vetto doctor --json" "$v" doctor --json

# ---- the rounds -----------------------------------------------------------------
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
rm -f "$out"/round-*.json "$out"/round-*.txt
for round in $(seq "$rounds"); do
    hf_args=(-N --warmup "$warmup" --runs "$runs" --style basic
        --export-json "$scratch/round-$round.json")
    for i in "${!names[@]}"; do
        hf_args+=(--prepare "${preps[$i]}")
    done
    for i in "${!names[@]}"; do
        hf_args+=(-n "${names[$i]}" "${cmds[$i]}")
    done
    say "round $round/$rounds: ${#names[@]} commands, $runs runs each after $warmup warm-up runs"
    run_as hyperfine "${hf_args[@]}" >"$out/round-$round.txt"
    cp "$scratch/round-$round.json" "$out/round-$round.json"
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
printf '%s\n' "${skipped[@]+"${skipped[@]}"}" >"$out/skipped.txt"
printf 'load average %s before, %s after' "$load_before" "$load_after" >"$out/load.txt"

# Merge the rounds: each row gets the times of every round, figures recomputed.
python3 - "$out/startup.json" "$out"/round-*.json <<'PY'
import json, statistics, sys
merged = {}
for path in sys.argv[2:]:
    for r in json.load(open(path))["results"]:
        m = merged.setdefault(r["command"], {"command": r["command"], "times": [], "exit_codes": []})
        m["times"] += r["times"]
        m["exit_codes"] += r.get("exit_codes") or []
results = []
for m in merged.values():
    t = m["times"]
    m.update(mean=statistics.fmean(t), stddev=statistics.stdev(t) if len(t) > 1 else 0.0,
             median=statistics.median(t), min=min(t), max=max(t))
    results.append(m)
json.dump({"results": results}, open(sys.argv[1], "w"), indent=1)
PY

# ---- probe micro-timing ---------------------------------------------------------
# `vetto doctor --json` reports how long its fast probe (the one `vetto run`
# makes at every start) took inside the process.
for _ in $(seq 200); do
    run_as "$v" doctor --json 2>/dev/null
done | python3 -c '
import json, statistics, sys
dec = json.JSONDecoder()
text = sys.stdin.read()
us, i = [], 0
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    doc, i = dec.raw_decode(text, i)
    us.append(doc["probe_us"])
us.sort()
print(f"probe (in process, {len(us)} runs): median {statistics.median(us):.0f} µs, "
      f"min {us[0]} µs, p90 {us[int(len(us) * 0.9) - 1]} µs")
' >"$out/probe.txt"

# ---- the Markdown table ---------------------------------------------------------
python3 - "$out" "$rounds" "$runs" >"$out/startup.md" <<'PY'
import json, os, sys
out, rounds, runs = sys.argv[1], sys.argv[2], sys.argv[3]
read = lambda name: open(os.path.join(out, name)).read().strip()
results = json.load(open(os.path.join(out, "startup.json")))["results"]
try:
    host = json.loads(read("doctor.json"))["host"]
    print(f"Host: Linux {host['kernel']} ({host['arch']}), Landlock ABI {host['landlock_abi']}, "
          f"{os.cpu_count()} CPUs; {read('load.txt')}.  ")
except (OSError, ValueError, KeyError):
    pass
print(f"hyperfine -N, {rounds} rounds × {runs} runs per row.\n")
ms = lambda s: s * 1000.0
bare = next((r for r in results if r["command"] == "bare"), None)
print("| command | median | mean ± σ | min | overhead over bare (median) | ratio |")
print("|---|---:|---:|---:|---:|---:|")
for r in results:
    if bare and r is not bare:
        over = f"+{ms(r['median'] - bare['median']):.2f} ms"
        ratio = f"×{r['median'] / bare['median']:.1f}"
    else:
        over, ratio = "—", "—"
    print(f"| `{r['command']}` | {ms(r['median']):.2f} ms | {ms(r['mean']):.2f} ± "
          f"{ms(r['stddev']):.2f} ms | {ms(r['min']):.2f} ms | {over} | {ratio} |")
for line in read("skipped.txt").splitlines():
    if line.strip():
        name, why = line.split("|", 1)
        print(f"| `{name}` | not measured: {why.strip()} | | | | |")
by = {r["command"]: r for r in results}
pairs = [(k, k.split(",")[0]) for k in by if "files" in k]
if pairs:
    print("\nAgainst the empty project (medians; min in brackets):\n")
    for k, empty in pairs:
        if empty in by:
            e, b = by[empty], by[k]
            print(f"- `{k}`: ×{b['median'] / e['median']:.2f} "
                  f"(×{b['min'] / e['min']:.2f}), {ms(b['median']):.1f} ms")
probe = read("probe.txt")
if probe:
    print(f"\n{probe}")
PY

cat "$out/round-$rounds.txt"
echo
cat "$out/startup.md"
say "wrote $out/startup.json, startup.md, round-*.json, doctor.json, probe.txt"
