#!/usr/bin/env bash
# A test suite's own loopback traffic with the network off (and, for the
# requests, with filtered egress), side by side in one run: bare;
# bubblewrap with a network namespace of its own (what FULL does); vetto
# full; vetto fs-only, where every TCP socket is made in
# vetto's namespace that leads nowhere (one round trip to its helper) and
# its bind and connect are performed by the supervisor (one notification
# each). Two workloads: 500 HTTP requests to a server on 127.0.0.1:0, each
# on a new connection (socket, connect, accept), and 2,000 bare
# `socket()`+`close()`.
#
#   benches/loopback.sh            # builds --release; as root measures as `tester`
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_vetto
bench_need_hyperfine
command -v bwrap >/dev/null || { echo "needs bubblewrap (apt-get install bubblewrap)" >&2; exit 1; }
bench_scratch /tmp/vetto-loopback.XXXXXX
p="$scratch/project"
mkdir -p "$p"
cat >"$p/serve.py" <<'PY'
import http.server, sys, threading, urllib.request
class Quiet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
threading.Thread(target=srv.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{srv.server_address[1]}/"
for _ in range(int(sys.argv[1])):
    urllib.request.urlopen(url).read()
srv.shutdown()
PY
cat >"$p/sockets.py" <<'PY'
import socket, sys
for _ in range(int(sys.argv[1])):
    socket.socket().close()
PY
bench_as_user
v="$scratch/vetto"
bw=(bwrap --unshare-net --die-with-parent --ro-bind / / --dev /dev --proc /proc --bind "$p" "$p" --chdir "$p")
cd "$p"
"${as_user[@]}" hyperfine -N --warmup 1 --runs 10 --style basic --export-markdown "$scratch/l.md" \
    -n '500 requests, bare' 'python3 serve.py 500' \
    -n '500 requests, bubblewrap --unshare-net' "${bw[*]} python3 serve.py 500" \
    -n '500 requests, vetto full' "$v run --tier full -- python3 serve.py 500" \
    -n '500 requests, vetto fs-only' "$v run --tier fs-only -- python3 serve.py 500" \
    -n '500 requests, vetto full --allow-domain' "$v run --tier full --allow-domain example.com -- python3 serve.py 500" \
    -n '500 requests, vetto fs-only --allow-domain' "$v run --tier fs-only --allow-domain example.com -- python3 serve.py 500" \
    -n '2000 sockets, bare' 'python3 sockets.py 2000' \
    -n '2000 sockets, bubblewrap --unshare-net' "${bw[*]} python3 sockets.py 2000" \
    -n '2000 sockets, vetto full' "$v run --tier full -- python3 sockets.py 2000" \
    -n '2000 sockets, vetto fs-only' "$v run --tier fs-only -- python3 sockets.py 2000" >/dev/null
cat "$scratch/l.md"
