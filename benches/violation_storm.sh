#!/usr/bin/env bash
# A job that causes 100,000 denied writes, 10,000 of them distinct, run
# bare and under `vetto ci` side by side: the job's slowdown, the size of
# the session log, and the time to render the reports again from it.
#
#   benches/violation_storm.sh          # builds --release, measures as `tester` when root
#   VETTO=target/release/vetto N=100000 DISTINCT=10000 benches/violation_storm.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
n=${N:-100000}
distinct=${DISTINCT:-10000}
bench_vetto
bench_scratch /tmp/vetto-storm.XXXXXX
mkdir -p "$scratch/project" "$scratch/outside"
cat >"$scratch/project/storm.py" <<PY
import os
n, distinct = $n, $distinct
denied = 0
for i in range(n):
    try:
        os.close(os.open("$scratch/outside/f%d" % (i % distinct), os.O_WRONLY | os.O_CREAT, 0o644))
    except OSError:
        denied += 1
print(denied)
PY
bench_as_user
if [[ $(id -u) == 0 ]]; then
    # Bare, the job must fail the same way: the outside directory is not writable to it.
    chown root: "$scratch/outside"
    chmod 555 "$scratch/outside"
fi
cd "$scratch/project"
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1 || true; e=$(date +%s.%N); echo "$e - $s" | bc; }
bare=$(t "${as_user[@]}" python3 storm.py)
sandboxed=$(t "${as_user[@]}" "$scratch/vetto" ci --tier fs-only --fail-on never --report-dir "$scratch/project/report" -- python3 storm.py)
log="$scratch/project/report/session.jsonl"
size=$(stat -c %s "$log")
render=$(t "${as_user[@]}" "$scratch/vetto" report --session "$log")
html=$(stat -c %s "$scratch/project/report/report.html")
sarif=$(gzip -c "$scratch/project/report/vetto.sarif" | wc -c)
printf '| job (%s denied writes, %s distinct) | bare | under `vetto ci --tier fs-only` | slowdown |\n|---|---:|---:|---:|\n' "$n" "$distinct"
printf '| wall time | %.2f s | %.2f s | ×%.1f |\n' "$bare" "$sandboxed" "$(echo "$sandboxed / $bare" | bc -l)"
printf '\n| session.jsonl | re-render SARIF + HTML + summary | report.html | vetto.sarif (gzip) |\n|---:|---:|---:|---:|\n'
printf '| %s KiB | %.2f s | %s KiB | %s KiB |\n' "$((size / 1024))" "$render" "$((html / 1024))" "$((sarif / 1024))"
