#!/usr/bin/env bash
# `cargo build` of a mid-size crate (issue 12's bar: at most 2 % over
# bare), side by side in one run: bare, `vetto run --tier fs-only` and
# `--tier full`, under `--preset cargo`. A fresh crate with twelve common
# dependencies (about 40 crates to compile) is fetched once bare and once
# into vetto's own cache (through its egress proxy, from the registry
# `--preset cargo` discovers); then each round builds it `--offline` from a
# clean `target/` in every way, in a shuffled order, so a loaded machine
# hurts all alike. Prints each build's wall and CPU time, the medians and
# least, and their ratios to bare.
#
#   benches/cargo_build.sh        # builds --release; as root measures as `tester`
#   BENCH_ROUNDS=5 BENCH_DIR=/mnt/tmpfs VETTO=/usr/local/bin/vetto benches/cargo_build.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_vetto
# BENCH_DIR: where the crate is built (default /tmp; a tmpfs keeps the
# disk out of the figures).
bench_scratch "${BENCH_DIR:-/tmp}/vetto-cargo.XXXXXX"
# The toolchain, where the bench user can read it: hard links when /tmp
# shares the sysroot's file system (a copy would be a gigabyte).
sysroot=$(rustc --print sysroot)
tc=$(mktemp -d /tmp/vetto-bench-rust.XXXXXX)
trap 'rm -rf "$scratch" "$tc"' EXIT
cp -al "$sysroot/bin" "$sysroot/lib" "$tc" 2>/dev/null || cp -a "$sysroot/bin" "$sysroot/lib" "$tc"
chmod -R a+rX "$tc"
p="$scratch/crate"
mkdir -p "$p/src"
cat >"$p/Cargo.toml" <<'EOF'
[package]
name = "bench-crate"
version = "0.1.0"
edition = "2021"

[dependencies]
anyhow = "1"
bitflags = "2"
clap = { version = "4", features = ["derive"] }
itertools = "0.14"
log = "0.4"
memchr = "2"
once_cell = "1"
regex = "1"
serde = { version = "1", features = ["derive"] }
serde_json = "1"
smallvec = "1"
thiserror = "2"
EOF
cat >"$p/src/main.rs" <<'EOF'
use clap::Parser;
use itertools::Itertools;

#[derive(Parser, serde::Serialize, serde::Deserialize)]
struct Args {
    #[arg(default_value = "a,b,c")]
    words: String,
}

#[derive(Debug, thiserror::Error)]
#[error("no words")]
struct NoWords;

bitflags::bitflags! {
    struct Seen: u8 { const A = 1; }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let re = regex::Regex::new(r"\w+")?;
    let words: smallvec::SmallVec<[&str; 4]> = re.find_iter(&args.words).map(|m| m.as_str()).collect();
    if words.is_empty() {
        return Err(NoWords.into());
    }
    static GREETING: once_cell::sync::Lazy<&str> = once_cell::sync::Lazy::new(|| "words");
    log::info!("{}", *GREETING);
    let _ = (Seen::A, memchr::memchr(b',', args.words.as_bytes()));
    println!("{}", serde_json::to_string(&words.iter().join(" "))?);
    Ok(())
}
EOF
bench_as_user
v="$scratch/vetto"
# A home of its own: the bare fetch fills its ~/.cargo, vetto its cache.
export PATH="$tc/bin:$PATH" HOME="$scratch/home"
"${as_user[@]}" mkdir -p "$HOME"
# What `--preset cargo` discovers, and the address each registry host has
# here: a mirror in a reserved range is refused by the proxy unless named.
allow=()
hosts=$("${as_user[@]}" env PATH="$PATH" HOME="$HOME" "$v" policy explain --preset cargo 2>&1 |
    sed -n 's/^ *\([^ ]*:[0-9]*\) *← discovered cargo.*/\1/p')
[[ -n $hosts ]] || { echo "--preset cargo discovers no registry here" >&2; exit 1; }
for hp in $hosts; do
    for addr in $(getent ahostsv4 "${hp%:*}" | awk '{print $1}' | sort -u); do
        [[ " ${allow[*]} " == *" $addr:${hp##*:} "* ]] || allow+=(--allow-domain "$addr:${hp##*:}")
    done
done
sandbox=(--preset cargo --allow-read "$tc" "${allow[@]}")
cd "$p"
run_as() { "${as_user[@]}" env PATH="$PATH" HOME="$HOME" "$@"; }
run_as cargo fetch -q
run_as "$v" run --tier fs-only "${sandbox[@]}" -- cargo fetch -q
run_as "$v" run --tier full "${sandbox[@]}" -- cargo fetch -q
ways=(bare fs-only full)
# `build WAY`: one clean build; prints its wall time and the CPU time
# (user + system) of everything it ran, in seconds. Outside, `time` sees
# the job's CPU only when the job is its own descendant (bare); vetto's
# job is reaped inside the sandbox, so there the job's CPU is timed inside
# and vetto's own (supervisor, proxy) outside, and the two are added.
job='TIMEFORMAT="%U %S"; { time cargo build --offline -q >/dev/null 2>&1; } 2>&1'
build() {
    rm -rf target
    local TIMEFORMAT='%R %U %S' wall user sys ju js
    case $1 in
        bare) { time run_as bash -c "$job" >"$scratch/inner" 2>/dev/null; } 2>"$scratch/outer" ;;
        *) { time run_as "$v" run --tier "$1" "${sandbox[@]}" -- bash -c "$job" \
            >"$scratch/inner" 2>/dev/null; } 2>"$scratch/outer" ;;
    esac
    read -r wall user sys <"$scratch/outer"
    read -r ju js <"$scratch/inner"
    [[ $1 == bare ]] && ju=0 js=0
    python3 -c "import sys; a = [float(x) for x in sys.argv[1:]]; print(a[0], round(sum(a[1:]), 3))" \
        "$wall" "$user" "$sys" "$ju" "$js"
}
rows="$scratch/rows.tsv"
# Round 0 warms the page cache and is not counted.
for round in $(seq 0 "${BENCH_ROUNDS:-4}"); do
    for w in $(printf '%s\n' "${ways[@]}" | shuf); do
        read -r wall cpu < <(build "$w")
        echo "round $round $w: wall $wall s, CPU $cpu s (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        [[ $round == 0 ]] || printf '%s\t%s\t%s\n' "$w" "$wall" "$cpu" >>"$rows"
    done
done
python3 - "$rows" "${ways[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
ways = sys.argv[2:]
wall = {w: [float(r[1]) for r in rows if r[0] == w] for w in ways}
cpu = {w: [float(r[2]) for r in rows if r[0] == w] for w in ways}
n = len(rows) // len(ways)
print(f"`cargo build --offline` from a clean `target/`, {n} rounds (seconds):")
print()
print("| | " + " | ".join(ways) + " |")
print("|---|" + "---:|" * len(ways))
for name, d, f in (("wall, median", wall, statistics.median), ("wall, fastest", wall, min),
                   ("CPU, median", cpu, statistics.median), ("CPU, least", cpu, min)):
    base = f(d["bare"])
    print(f"| {name} | " + " | ".join(
        f"{f(d[w]):.2f}" + ("" if w == "bare" else f" (×{f(d[w]) / base:.3f})") for w in ways) + " |")
PY
