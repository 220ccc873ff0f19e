#!/usr/bin/env bash
# A job's server reached from the host through a published port (issue
# P11): 500 HTTP requests from a client outside to a server inside, each on
# a new connection, side by side in one run: bare (client and server on the
# host's loopback); vetto full and fs-only with `--publish`, where each
# connection is accepted by vetto on the host's loopback, a socket is made
# in the job's namespace (the helper's round trip) and bytes are copied
# both ways by two threads. Each command includes starting and stopping the
# server (and vetto).
#
#   benches/publish.sh            # builds --release; as root measures as `tester`
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_vetto
bench_need_hyperfine
bench_scratch /tmp/vetto-publish.XXXXXX
p="$scratch/project"
mkdir -p "$p"
cat >"$p/serve.py" <<'PY'
import http.server, sys
class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Quiet).serve_forever()
PY
cat >"$p/client.py" <<'PY'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/"
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for _ in range(200):
    try:
        opener.open(url, timeout=5).read()
        break
    except OSError:
        time.sleep(0.05)
for _ in range(int(sys.argv[2])):
    opener.open(url, timeout=10).read()
PY
bench_as_user
v="$scratch/vetto"
cd "$p"
run() { # server command, client port
    echo "sh -c '$1 & S=\$!; python3 client.py $2 500; kill \$S; wait \$S 2>/dev/null; true'"
}
"${as_user[@]}" hyperfine -N --warmup 1 --runs 10 --style basic --export-markdown "$scratch/p.md" \
    -n '500 requests from outside, bare' "$(run 'python3 serve.py 18200' 18200)" \
    -n '500 requests through --publish, vetto full' "$(run "$v run --tier full --publish 18201:18200 -- python3 serve.py 18200" 18201)" \
    -n '500 requests through --publish, vetto fs-only' "$(run "$v run --tier fs-only --publish 18202:18200 -- python3 serve.py 18200" 18202)" >/dev/null
cat "$scratch/p.md"
