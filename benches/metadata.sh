#!/usr/bin/env bash
# `tar xf` of 2,000 files with modes and times into the project: bare, and
# at FS-ONLY with the binary before and after mode/owner/time changes were
# notified (every `fchmod`/`utimensat` tar makes is a notification then).
#
#   VETTO_BEFORE=/path/to/old/vetto benches/metadata.sh   # as root: measures as `tester`
#   VETTO=target/release/vetto VETTO_BEFORE=… BENCH_DIR=/dev/shm benches/metadata.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_vetto
bench_need_hyperfine
bench_scratch "${BENCH_DIR:-/tmp}/vetto-meta.XXXXXX"
rows=()
if [[ -n ${VETTO_BEFORE:-} ]]; then
    cp "$VETTO_BEFORE" "$scratch/vetto-before"
    rows+=(-n 'tar x, vetto fs-only, before' "$scratch/vetto-before run --tier fs-only -- tar xf pkg.tar")
fi
p="$scratch/project"
mkdir -p "$p" "$scratch/tarsrc/pkg"
for i in $(seq 2000); do echo "data $i" >"$scratch/tarsrc/pkg/d$i.txt"; done
chmod 0640 "$scratch"/tarsrc/pkg/d1*.txt
touch -d 2001-01-01 "$scratch"/tarsrc/pkg/*
tar -C "$scratch/tarsrc" -cf "$p/pkg.tar" pkg
git -C "$p" init -q
bench_as_user
cd "$p"
"${as_user[@]}" hyperfine -N --warmup 2 --runs "${BENCH_RUNS:-15}" --style basic \
    --export-markdown "$scratch/m.md" --prepare "rm -rf pkg" \
    -n 'tar x, bare' 'tar xf pkg.tar' \
    "${rows[@]}" \
    -n 'tar x, vetto fs-only' "$scratch/vetto run --tier fs-only -- tar xf pkg.tar" >/dev/null
cat "$scratch/m.md"
