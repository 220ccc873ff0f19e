//! What must keep working inside the sandbox, at every tier: a sandbox
//! that breaks builds gets switched off. Each test runs real tools on the
//! project.

use crate::util::{Tier, World, read};
use crate::{at_every_tier, require};

/// Runs as an unprivileged user: read, modify, create and delete files
/// below existing project directories.
fn project_files_are_readable_and_writable(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let out = w.sh_sandboxed(
        "set -e; cat README.md; echo 'edited in sandbox' >> README.md; mkdir -p src/gen; echo generated > src/gen/out.txt; \
         cp src/main.c src/copy.c; rm src/copy.c; mv hello.py hello2.py; mv hello2.py hello.py; echo ok",
    );
    out.assert_success()
        .assert_stdout_contains("# demo project")
        .assert_stdout_contains("ok");
    assert!(
        read(&w.project.join("README.md"))
            .unwrap()
            .contains("edited in sandbox")
    );
    assert_eq!(
        read(&w.project.join("src/gen/out.txt")).as_deref(),
        Some("generated\n")
    );
    assert!(!w.project.join("src/copy.c").exists());
    assert!(w.project.join("hello.py").exists());
}
at_every_tier!(project_files_are_readable_and_writable);

/// Runs as an unprivileged user: tools that create new top-level entries
/// in the project — `npm install` (node_modules/, announced by
/// package.json), `cargo build` (target/, announced by Cargo.toml), a new
/// file at the root (written, read back, appended to), a new directory at
/// the root.
fn new_top_level_entries_can_be_created(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.write(
        &w.project.join("package.json"),
        "{\"name\": \"demo\", \"version\": \"1.0.0\"}\n",
    );
    w.write(
        &w.project.join("Cargo.toml"),
        "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    let out = w.sh_sandboxed(
        "set -e; mkdir -p node_modules/dep; touch node_modules/x; echo 'module.exports = 1' > node_modules/dep/index.js; \
         mkdir -p target/debug; echo bin > target/debug/app; touch newfile; echo data > newfile2; mkdir newdir; \
         cat newfile2; echo more >> newfile2; cat node_modules/dep/index.js; echo ok",
    );
    out.assert_success().assert_stdout_contains("ok");
    for rel in [
        "node_modules/x",
        "node_modules/dep/index.js",
        "target/debug/app",
        "newfile",
        "newfile2",
        "newdir",
    ] {
        assert!(
            w.project.join(rel).exists(),
            "{rel} was not created\n{}",
            out.dump()
        );
    }
    assert_eq!(
        read(&w.project.join("newfile2")).as_deref(),
        Some("data\nmore\n")
    );
}
at_every_tier!(new_top_level_entries_can_be_created);

/// Runs as an unprivileged user: `git status`, `git add -A && git commit`,
/// `git log` — git writes objects, the index and refs inside `.git` while
/// hooks and config stay protected (the same job cannot write a hook or
/// the config, and the commit still works).
fn git_status_add_commit_work(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let out = w.sh_sandboxed(
        "set -e; git status --short; echo change >> README.md; echo new > added.txt; git add -A; \
         git commit -q -m 'commit from sandbox'; git log --oneline | head -1; git status --short | wc -l; \
         if echo planted > .git/hooks/pre-commit 2>/dev/null; then echo hook-written; fi; \
         if echo '[core]' >> .git/config 2>/dev/null; then echo config-written; fi",
    );
    out.assert_success()
        .assert_stdout_contains("commit from sandbox")
        .assert_stdout_lacks("hook-written")
        .assert_stdout_lacks("config-written");
    assert!(!w.project.join(".git/hooks/pre-commit").exists());
    w.run_bare(&["git", "log", "-1", "--format=%s"])
        .assert_stdout_contains("commit from sandbox");
    w.run_bare(&["git", "fsck", "--no-progress"])
        .assert_success();
}
at_every_tier!(git_status_add_commit_work);

/// Runs as an unprivileged user: a C compiler (temporary files in
/// `$TMPDIR`, output in the project), the binary it built, python and sh.
fn compiler_and_interpreters_run(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let out = w.sh_sandboxed(
        "set -e; cc -O0 -o hello src/main.c; ./hello; python3 hello.py; python3 -c 'import json, sys; print(json.dumps({\"ok\": sys.version_info >= (3,)}))'; \
         sh -c 'echo from-sh'; head -1 /etc/passwd >/dev/null",
    );
    out.assert_success()
        .assert_stdout_contains("hello from c")
        .assert_stdout_contains("hello from python")
        .assert_stdout_contains("{\"ok\": true}")
        .assert_stdout_contains("from-sh");
}
at_every_tier!(compiler_and_interpreters_run);

/// Runs as an unprivileged user: `$TMPDIR` (a fresh per-session directory)
/// and `/dev/null` are writable; the session directory is gone afterwards.
fn tmpdir_and_dev_null_are_writable(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let out = w.sh_sandboxed(
        "set -e; test -n \"$TMPDIR\"; echo x > \"$TMPDIR/f\"; cat \"$TMPDIR/f\"; f=$(mktemp); echo y > \"$f\"; mkdir \"$TMPDIR/d\"; touch \"$TMPDIR/d/g\"; \
         echo discard > /dev/null; echo \"tmpdir=$TMPDIR\"",
    );
    out.assert_success().assert_stdout_contains("tmpdir=");
    let tmpdir = out
        .stdout()
        .lines()
        .find_map(|l| l.strip_prefix("tmpdir="))
        .unwrap()
        .to_owned();
    assert_ne!(
        tmpdir,
        w.tmp.to_str().unwrap(),
        "the job got vetto's own TMPDIR, not a per-session one"
    );
    assert!(
        !std::path::Path::new(&tmpdir).exists(),
        "the session temp dir {tmpdir} was left behind"
    );
}
at_every_tier!(tmpdir_and_dev_null_are_writable);

/// Runs as an unprivileged user: a build tool's own unix socket in `$TMPDIR`
/// (servers, compilers' job servers) still works: only sockets outside the
/// allowed paths are refused.
fn unix_socket_in_session_tmpdir_works(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let script = "import os, socket\n\
p = os.path.join(os.environ['TMPDIR'], 's.sock')\n\
srv = socket.socket(socket.AF_UNIX); srv.bind(p); srv.listen(1)\n\
c = socket.socket(socket.AF_UNIX); c.connect(p)\n\
a, _ = srv.accept(); c.sendall(b'ping'); print(a.recv(4).decode())\n";
    w.run_sandboxed(&["python3", "-c", script])
        .assert_success()
        .assert_stdout_contains("ping");
}
at_every_tier!(unix_socket_in_session_tmpdir_works);

/// Runs as an unprivileged user: a job's own abstract unix socket (test
/// runners and language servers use them) still works: only sockets
/// outside the sandbox are out of reach.
fn abstract_socket_of_the_job_itself_works(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let script = "import os, socket\n\
name = b'\\0vetto-control-%d' % os.getpid()\n\
srv = socket.socket(socket.AF_UNIX); srv.bind(name); srv.listen(1)\n\
c = socket.socket(socket.AF_UNIX); c.connect(name)\n\
a, _ = srv.accept(); c.sendall(b'pong'); print(a.recv(4).decode())\n";
    w.run_sandboxed(&["python3", "-c", script])
        .assert_success()
        .assert_stdout_contains("pong");
}
at_every_tier!(abstract_socket_of_the_job_itself_works);

/// Runs as an unprivileged user: the same git and compiler work in a
/// project whose root holds no masked file (no `.env`), which isolates the
/// cause when the controls above fail only with a root `.env` (see
/// docs/tiers.md, "What remains").
fn git_and_compiler_work_without_root_dotenv(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.sh_bare("rm .env").assert_success();
    let out = w.sh_sandboxed(
        "set -e; cc -O0 -o hello src/main.c; ./hello; echo new > added.txt; cat added.txt; \
         git add -A; git commit -q -m 'commit from sandbox'; git log --oneline | head -1",
    );
    out.assert_success()
        .assert_stdout_contains("hello from c")
        .assert_stdout_contains("commit from sandbox");
}
at_every_tier!(git_and_compiler_work_without_root_dotenv);
mod agent;
pub mod go;
mod local_servers;
mod long_tail;
mod registry_env;
mod round_trip;
pub(crate) mod toolchains;
