#!/usr/bin/env bash
# A secret's host read by the proxy (issue P13) against a plain tunnel to
# the same server, side by side in one run: one 256 MiB download and 200
# small requests on one kept-alive connection, by curl, from an HTTPS
# server on the host's loopback (Python's ssl, a test authority made
# here). Bare: curl straight to the server. Tunnel: `--allow-domain`, the
# proxy copies TLS bytes it cannot read. Secret: `--secret`, the proxy
# ends the job's TLS, reads each request head, puts the value in and
# opens its own TLS to the server (two TLS layers where the tunnel has
# one). Each command includes vetto's start and end. Then the same over
# HTTP/2 (curl --http2, a node `http2` server that speaks nothing else),
# when node is on PATH: each request a stream the proxy reads.
#
#   benches/secret.sh            # builds --release; as root measures as `tester`
#   BENCH_MIB=64 benches/secret.sh
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_vetto
bench_need_hyperfine
command -v openssl >/dev/null || { echo "needs openssl" >&2; exit 1; }
bench_scratch /tmp/vetto-secret.XXXXXX
mib=${BENCH_MIB:-256}
p="$scratch/project"
mkdir -p "$p"
cd "$p"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
    -subj "/CN=bench authority" -addext "basicConstraints=critical,CA:TRUE" \
    -addext "keyUsage=keyCertSign" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
    -subj "/CN=registry.test" 2>/dev/null
printf 'subjectAltName=DNS:registry.test\n' >ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
    -out server.pem -days 2 -extfile ext 2>/dev/null
cat >serve.py <<'PY'
import http.server, ssl, sys
BIG = b"x" * (int(sys.argv[2]) << 20)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Head and body are two writes: with Nagle's algorithm the body waits
    # for the client's delayed ACK (40 ms a request, bare as well).
    disable_nagle_algorithm = True
    def do_GET(self):
        body = BIG if self.path == "/big" else b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("server.pem", "server.key")
s.socket = ctx.wrap_socket(s.socket, server_side=True)
s.serve_forever()
PY
cat >serve.js <<'JS'
const http2 = require("http2"), fs = require("fs");
const big = Buffer.alloc(Number(process.argv[3]) << 20, "x");
const s = http2.createSecureServer({ cert: fs.readFileSync("server.pem"), key: fs.readFileSync("server.key") });
s.on("stream", (stream, h) => {
  stream.respond({ ":status": 200 });
  stream.end(h[":path"] === "/big" ? big : "ok");
});
s.listen(Number(process.argv[2]), "127.0.0.1");
JS
bench_as_user
port=18300
h2_port=18301
"${as_user[@]}" python3 serve.py $port "$mib" &
server=$!
h2_server=
if command -v node >/dev/null; then
    "${as_user[@]}" node serve.js $h2_port "$mib" &
    h2_server=$!
fi
trap 'kill $server $h2_server 2>/dev/null; rm -rf "$scratch"' EXIT
sleep 1
v="$scratch/vetto"
url="https://registry.test:$port"
small=$(for _ in $(seq 200); do printf '%s/small ' "$url"; done)
token=bench_0123456789abcdefghijklmnop
pin="--resolve registry.test:127.0.0.1"
tunnel="$pin --allow-domain registry.test:$port"
secret="$pin --secret BENCH_TOKEN@registry.test:$port"
# curl in the tunnel trusts the test authority itself; with --secret it
# trusts vetto's bundle (CURL_CA_BUNDLE), and vetto trusts the authority.
get() { echo "sh -c 'curl -sS --fail -o /dev/null -H \"Authorization: Bearer \$BENCH_TOKEN\" $1 $2'"; }
bare="--resolve registry.test:$port:127.0.0.1 --cacert ca.pem"
runs=(big small)
[[ -n $h2_server ]] && runs+=(h2-big h2-small)
for what in "${runs[@]}"; do
    case $what in
    h2-*)
        port=$h2_port url="https://registry.test:$h2_port" proto="HTTP/2, "
        small=$(for _ in $(seq 200); do printf '%s/small ' "$url"; done)
        bare="--resolve registry.test:$port:127.0.0.1 --cacert ca.pem"
        tunnel="$pin --allow-domain registry.test:$port"
        secret="$pin --secret BENCH_TOKEN@registry.test:$port"
        get() { echo "sh -c 'curl --http2 -sS --fail -o /dev/null -H \"Authorization: Bearer \$BENCH_TOKEN\" $1 $2'"; }
        ;;
    *) proto="" ;;
    esac
    if [[ ${what#h2-} == big ]]; then target="$url/big"; label="${proto}${mib} MiB download"; else target=$small; label="${proto}200 requests, one connection"; fi
    "${as_user[@]}" env BENCH_TOKEN=$token SSL_CERT_FILE="$p/ca.pem" \
        hyperfine -N --show-output --warmup 1 --runs 5 --export-markdown "$scratch/$what.md" \
        -n "$label, bare" "$(get "$bare" "$target")" \
        -n "$label, tunnel, vetto full" "$v run --tier full $tunnel --env-pass BENCH_TOKEN -- $(get '--cacert ca.pem' "$target")" \
        -n "$label, --secret, vetto full" "$v run --tier full $secret -- $(get '' "$target")" \
        -n "$label, tunnel, vetto fs-only" "$v run --tier fs-only $tunnel --env-pass BENCH_TOKEN -- $(get '--cacert ca.pem' "$target")" \
        -n "$label, --secret, vetto fs-only" "$v run --tier fs-only $secret -- $(get '' "$target")" >/dev/null
    cat "$scratch/$what.md"
done
