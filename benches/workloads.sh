#!/usr/bin/env bash
# Real work under the sandbox, side by side with the same work bare, in one
# run: `git add -A` of 2,000 new files (every object a notified create,
# except at FULL with `--check-creations after`) and extracting a
# 2,000-file tarball into the project.
#
#   benches/workloads.sh            # builds --release; as root measures as `tester`
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_vetto
bench_need_hyperfine
bench_scratch /tmp/vetto-work.XXXXXX
p="$scratch/project"
mkdir -p "$p/src" "$scratch/tarsrc/pkg"
for i in $(seq 2000); do echo "file $i" >"$p/src/f$i.txt"; echo "data $i" >"$scratch/tarsrc/pkg/d$i.txt"; done
tar -C "$scratch/tarsrc" -cf "$p/pkg.tar" pkg
git -C "$p" init -q
printf 'pkg/\n' >"$p/.gitignore"
bench_as_user
v="$scratch/vetto"
reset='rm -rf .git/index .git/objects/?? pkg'
cd "$p"
"${as_user[@]}" hyperfine -N --warmup 2 --runs 10 --style basic --export-markdown "$scratch/w.md" \
    --prepare "sh -c '$reset'" \
    -n 'git add -A, bare' 'git add -A' \
    -n 'git add -A, vetto fs-only' "$v run --tier fs-only -- git add -A" \
    -n 'git add -A, vetto full' "$v run --tier full -- git add -A" \
    -n 'git add -A, vetto full --check-creations after' "$v run --tier full --check-creations after -- git add -A" \
    -n 'tar x, bare' 'tar xf pkg.tar' \
    -n 'tar x, vetto fs-only' "$v run --tier fs-only -- tar xf pkg.tar" \
    -n 'tar x, vetto full' "$v run --tier full -- tar xf pkg.tar" >/dev/null
cat "$scratch/w.md"
