//! A JVM's trust store for `--secret` and `--rule` under the maven and
//! gradle presets (issue P13): the JVM reads none of the variables that
//! name the trust bundle (`SSL_CERT_FILE` …), only its own trust store. So
//! the JDK's `cacerts` is copied into the session's `$TMPDIR`, the
//! session's authority added with the JDK's own `keytool` (run outside the
//! sandbox, on files vetto just wrote), and `JAVA_TOOL_OPTIONS` names the
//! copy for every JVM of the job (Maven, Gradle and their daemons).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The copy's name in the session's temporary directory.
const STORE: &str = "vetto-java-truststore";
/// The authority's certificate, for `keytool` to read.
const AUTHORITY: &str = "vetto-ca.pem";
/// `cacerts`' well-known password (it protects nothing: the store holds
/// public certificates only).
const PASSWORD: &str = "changeit";

/// Write the store; the `JAVA_TOOL_OPTIONS` the job gets (the caller's
/// own, if passed, kept before vetto's).
pub fn store(
    session_tmp: &Path,
    authority: &str,
    env: &[(String, String)],
    job_env: &[(String, String)],
) -> Result<(String, String), String> {
    use crate::sys::safe_fs::{Dir, Parents};
    let keytool = on_path("keytool", env).ok_or("no keytool on PATH (a JDK's)")?;
    let home = keytool
        .canonicalize()
        .ok()
        .and_then(|k| Some(k.parent()?.parent()?.to_path_buf()))
        .ok_or("cannot find the JDK of keytool")?;
    // Distributions link it to their own (`/etc/ssl/certs/java/cacerts`):
    // a system file, not the job's, so its link is followed here.
    let cacerts = home
        .join("lib/security/cacerts")
        .canonicalize()
        .map_err(|e| format!("the JDK's cacerts: {e}"))?;
    let dir = Dir::open(session_tmp, Parents::AsNamed).map_err(|e| e.to_string())?;
    dir.copy_in(STORE, &cacerts, 0o644)
        .map_err(|e| format!("copying {}: {e}", cacerts.display()))?;
    dir.write_file(AUTHORITY, authority.as_bytes(), 0o644)
        .map_err(|e| e.to_string())?;
    let store = session_tmp.join(STORE);
    let status = Command::new(&keytool)
        .args([
            "-importcert",
            "-noprompt",
            "-alias",
            "vetto-session-authority",
        ])
        .arg("-file")
        .arg(session_tmp.join(AUTHORITY))
        .arg("-keystore")
        .arg(&store)
        .args(["-storepass", PASSWORD])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("running {}: {e}", keytool.display()))?;
    if !status.success() {
        return Err(format!(
            "{} -importcert failed ({status})",
            keytool.display()
        ));
    }
    let ours = format!(
        "-Djavax.net.ssl.trustStore={} -Djavax.net.ssl.trustStorePassword={PASSWORD}",
        store.display()
    );
    let options = match job_env.iter().find(|(k, _)| k == "JAVA_TOOL_OPTIONS") {
        Some((_, theirs)) if !theirs.is_empty() => format!("{theirs} {ours}"),
        _ => ours,
    };
    Ok(("JAVA_TOOL_OPTIONS".to_string(), options))
}

/// `name` as `PATH` (of vetto's environment) finds it.
fn on_path(name: &str, env: &[(String, String)]) -> Option<PathBuf> {
    let path = env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str())?;
    std::env::split_paths(path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}
