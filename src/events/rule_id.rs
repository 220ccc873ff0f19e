//! The stable violation classes. Each id is the SARIF `ruleId`, the name of
//! its page under `docs/rules/`, and the key reviewers filter on, so a rename
//! is a breaking change (the `rule_ids_are_stable` snapshot makes it a
//! reviewed diff).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The repository vetto and its GitHub Action are published from
/// (`uses: vetto/action@…`): written once, here. Every address vetto
/// prints or writes is derived from it, and the docs, the examples and the
/// packaging (release downloads) name the same one, which
/// `tests/examples.rs` checks.
macro_rules! repository {
    () => {
        "https://github.com/vetto/action"
    };
}

/// The project's home (SARIF `informationUri`).
pub const HOMEPAGE: &str = repository!();
/// Where the rule pages live; the SARIF `helpUri` of every rule.
pub const DOCS_BASE: &str = concat!(repository!(), "/blob/main/docs/rules/");

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RuleId {
    FsWriteDenied,
    FsReadDenied,
    SecretReadDenied,
    GitPersistenceBlocked,
    CiControlFileBlocked,
    UnixSocketDenied,
    NetSocketDenied,
    NetEgressBlocked,
    SyscallDenied,
    ProcessEscaped,
    LimitTimeout,
    LimitMemory,
    LimitProcs,
    /// Retired: never recorded any more. Withholding a variable is vetto's
    /// decision before the job started, not something the job did: it is
    /// the session start's `withheld_env`. Logs of earlier versions that
    /// carry it still parse, and the reports fold it into that list.
    SecretEnvWithheld,
    PersistencePlanted,
    SecretSentElsewhere,
}

/// How loud a class is in code scanning (SARIF `level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Note,
    Warning,
    Error,
}

impl RuleId {
    /// Every rule a violation can have (the retired `secret-env-withheld`
    /// is not one).
    pub const ALL: [RuleId; 15] = [
        RuleId::FsWriteDenied,
        RuleId::FsReadDenied,
        RuleId::SecretReadDenied,
        RuleId::GitPersistenceBlocked,
        RuleId::CiControlFileBlocked,
        RuleId::UnixSocketDenied,
        RuleId::NetSocketDenied,
        RuleId::NetEgressBlocked,
        RuleId::SyscallDenied,
        RuleId::ProcessEscaped,
        RuleId::LimitTimeout,
        RuleId::LimitMemory,
        RuleId::LimitProcs,
        RuleId::PersistencePlanted,
        RuleId::SecretSentElsewhere,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RuleId::FsWriteDenied => "fs-write-denied",
            RuleId::FsReadDenied => "fs-read-denied",
            RuleId::SecretReadDenied => "secret-read-denied",
            RuleId::GitPersistenceBlocked => "git-persistence-blocked",
            RuleId::PersistencePlanted => "persistence-planted",
            RuleId::CiControlFileBlocked => "ci-control-file-blocked",
            RuleId::UnixSocketDenied => "unix-socket-denied",
            RuleId::NetSocketDenied => "net-socket-denied",
            RuleId::NetEgressBlocked => "net-egress-blocked",
            RuleId::SyscallDenied => "syscall-denied",
            RuleId::ProcessEscaped => "process-escaped",
            RuleId::LimitTimeout => "limit-timeout",
            RuleId::LimitMemory => "limit-memory",
            RuleId::LimitProcs => "limit-procs",
            RuleId::SecretEnvWithheld => "secret-env-withheld",
            RuleId::SecretSentElsewhere => "secret-sent-elsewhere",
        }
    }

    /// SARIF `name`: PascalCase, as code scanning shows it.
    pub fn name(self) -> &'static str {
        match self {
            RuleId::FsWriteDenied => "FsWriteDenied",
            RuleId::FsReadDenied => "FsReadDenied",
            RuleId::SecretReadDenied => "SecretReadDenied",
            RuleId::GitPersistenceBlocked => "GitPersistenceBlocked",
            RuleId::PersistencePlanted => "PersistencePlanted",
            RuleId::CiControlFileBlocked => "CiControlFileBlocked",
            RuleId::UnixSocketDenied => "UnixSocketDenied",
            RuleId::NetSocketDenied => "NetSocketDenied",
            RuleId::NetEgressBlocked => "NetEgressBlocked",
            RuleId::SyscallDenied => "SyscallDenied",
            RuleId::ProcessEscaped => "ProcessEscaped",
            RuleId::LimitTimeout => "LimitTimeout",
            RuleId::LimitMemory => "LimitMemory",
            RuleId::LimitProcs => "LimitProcs",
            RuleId::SecretEnvWithheld => "SecretEnvWithheld",
            RuleId::SecretSentElsewhere => "SecretSentElsewhere",
        }
    }

    /// One line: what happened.
    pub fn description(self) -> &'static str {
        match self {
            RuleId::FsWriteDenied => "A write outside the policy's writable paths was denied",
            RuleId::FsReadDenied => "A read outside the policy's readable paths was denied",
            RuleId::SecretReadDenied => "A read of a masked secret was denied",
            RuleId::GitPersistenceBlocked => {
                "A write to .git/hooks or .git/config (persistence beyond the job) was blocked"
            }
            RuleId::PersistencePlanted => {
                "A nested repository or a file that other tools run later (hooks, .envrc, editor tasks, agent settings …) was planted"
            }
            RuleId::CiControlFileBlocked => {
                "A write to a CI control file (GITHUB_ENV, GITHUB_PATH, GITHUB_OUTPUT …) was blocked"
            }
            RuleId::UnixSocketDenied => {
                "A connection to a host Unix socket (ssh-agent, docker, D-Bus) was denied"
            }
            RuleId::NetSocketDenied => "A network socket was denied while the network is off",
            RuleId::NetEgressBlocked => "A connection out of the sandbox was blocked",
            RuleId::SyscallDenied => {
                "A dangerous system call (ptrace, io_uring, unshare, mount, bpf …) was denied"
            }
            RuleId::ProcessEscaped => {
                "A process was still alive when the session ended and was killed"
            }
            RuleId::LimitTimeout => "The job ran past its --timeout and was killed",
            RuleId::LimitMemory => "The job exceeded its memory limit and was killed",
            RuleId::LimitProcs => "The job hit its process limit",
            RuleId::SecretEnvWithheld => {
                "A credential-like environment variable was withheld from the job"
            }
            RuleId::SecretSentElsewhere => {
                "A secret's placeholder was sent to a host the secret is not for (the value stayed with vetto)"
            }
        }
    }

    /// A paragraph: why vetto blocks this and what an attacker gets from it.
    pub fn full_description(self) -> &'static str {
        match self {
            RuleId::FsWriteDenied => {
                "The job tried to create, modify, rename or delete a file that the policy does not \
                 make writable, or to change its mode, owner or times (`chmod`, `chown`, `touch`). \
                 Writes outside the project and the build outputs are how malicious \
                 packages plant code that outlives the job (shell profiles, other repositories, \
                 caches that later jobs trust)."
            }
            RuleId::FsReadDenied => {
                "The job tried to read a file that the policy does not make readable. Reading \
                 outside the project is how a dependency gathers credentials and host details to \
                 exfiltrate."
            }
            RuleId::SecretReadDenied => {
                "The job tried to read a path that the policy masks as a secret (for example \
                 ~/.ssh, ~/.npmrc, ~/.aws or a project .env file). vetto detected the attempt \
                 without letting the content through. Build tools rarely need these files; \
                 credential stealers always do."
            }
            RuleId::GitPersistenceBlocked => {
                "The job tried to write to .git/hooks or .git/config. A hook or a config entry \
                 (core.fsmonitor, core.hooksPath, a credential helper) runs code on the developer's \
                 or the next job's machine long after this job ended."
            }
            RuleId::PersistencePlanted => {
                "The job left behind, or tried to create, something that another tool runs \
                 later, outside the sandbox: a nested git repository (an entry named .git below \
                 the project root, or a bare repository); a change to what a repository's own \
                 configuration names (its config and every file it includes, core.hooksPath \
                 wherever it points, hooks/, info/, and any program a config value names by \
                 path, such as a core.fsmonitor or filter script); a change to an editor's, \
                 shell's, hook manager's or coding agent's project files (.vscode/, \
                 .devcontainer/, .envrc, mise.toml, .husky/, .pre-commit-config.yaml, \
                 .mcp.json, .claude/settings.json and the programs they name); or, under an \
                 agent preset, a change to what the agent's own settings make it run (hooks, MCP \
                 servers, notify programs) or to the programs it installs in its own home and \
                 starts from there (Codex's packages/, its app-server daemon). A `git status` or `git commit`, an editor opening the \
                 folder, or the agent's next start runs what these say. Where the seccomp-notify \
                 supervisor sees the creation (FULL and FS-ONLY, a project with a .git \
                 directory), creating, renaming into place or symlinking an entry named .git \
                 below the root is refused and recorded with the process. On every tier vetto \
                 keeps what each of these places holds when the session starts (resolved from \
                 the configuration as it was then) and compares the content after the session, \
                 never following the job's links, so a file renamed into place is found \
                 however old it is. Each file is compared in its tool's own format (a cargo \
                 config by the keys that run programs, an `.npmrc` by `script-shell`, \
                 `node-options` and the like), so a harmless edit is none. What changed is put \
                 back as it was when the session started (taken away if it is new), the \
                 session's version kept in `put-back.tar` in the report directory with the one \
                 `tar` command that takes it back; an agent's own settings in the home are put \
                 back beside a set-aside copy. What changed is reported with its path and the \
                 setting that makes it run, the process being unknown."
            }
            RuleId::CiControlFileBlocked => {
                "The job tried to write to a file that the CI runner reads back between steps \
                 (GITHUB_ENV, GITHUB_PATH, GITHUB_OUTPUT, GITHUB_STATE, GITHUB_STEP_SUMMARY). \
                 Writing to GITHUB_ENV or GITHUB_PATH injects environment variables or binaries \
                 into every later step, including steps that hold deployment secrets."
            }
            RuleId::UnixSocketDenied => {
                "The job tried to connect to a Unix socket outside the sandbox. The ssh-agent \
                 socket signs as the developer; the Docker socket is root on the host."
            }
            RuleId::NetSocketDenied => {
                "The job tried to open a network socket while the policy turns the network off. \
                 Exfiltration and second-stage downloads need the network."
            }
            RuleId::NetEgressBlocked => {
                "The job tried to reach a destination the policy does not allow. With the network \
                 off, at the FULL tier the sandbox has its own network namespace with nothing but \
                 loopback: vetto sees the connect(), names the process and refuses it as the \
                 missing route would (ENETUNREACH); a name lookup is answered NXDOMAIN by \
                 vetto's DNS stub inside the namespace (127.0.0.53, over UDP and TCP, where \
                 the sandbox's /etc/resolv.conf points) and recorded with the queried name and \
                 the process; at FS-ONLY, where user namespaces exist, the resolver's UDP socket \
                 comes from a network namespace of vetto's that leads nowhere, whose stub does \
                 the same for any resolver address (without them, or over TCP, the resolver's \
                 socket itself is refused: net-socket-denied). With filtered egress (`[network] allow`, \
                 `--allow-domain`) vetto decides every connection by name and port, at both \
                 tiers. The proxy refuses a name no `allow` entry names (a name without a port \
                 allows 80 and 443 only), one a `deny` entry names, an address the job chose that \
                 no ip rule names, an internal answer (loopback, private, link-local, CGNAT, the \
                 metadata address) that no ip rule names and no --resolve pin puts that name at, \
                 or a TLS server name that disagrees with the allowed host; the DNS stub refuses \
                 to resolve a name that is not allowed (the target is the queried name); the \
                 supervisor refuses a direct connect() past the proxy (FS-ONLY, ECONNREFUSED). \
                 The report lists every destination, allowed or not, with the process that \
                 contacted it; code scanning gets one alert per denied destination. \
                 Exfiltration and second-stage downloads need the network."
            }
            RuleId::SyscallDenied => {
                "The job made a system call that the sandbox never allows (ptrace, io_uring, \
                 unshare/setns, mount, bpf, kernel module or keyring calls …). These calls are \
                 used to escape sandboxes or attack the kernel, and builds do not need them."
            }
            RuleId::ProcessEscaped => {
                "A process started by the job was still running when the job's main command \
                 ended. Daemonised processes are how a job leaves something behind on a runner; \
                 vetto killed it."
            }
            RuleId::LimitTimeout => {
                "The job ran longer than its --timeout; vetto killed the whole process tree."
            }
            RuleId::LimitMemory => {
                "The job's process tree used more memory than --max-memory; vetto killed it."
            }
            RuleId::LimitProcs => {
                "The job tried to start more processes or threads than --max-procs allows \
                 (a fork bomb, or a build that needs a higher limit)."
            }
            RuleId::SecretEnvWithheld => {
                "Retired. Earlier versions recorded each environment variable that vetto withheld \
                 from the job as a violation; withholding is vetto's decision before the job \
                 started, so it is now said once, on the session-start line and in the \
                 session log's `withheld_env`."
            }
            RuleId::SecretSentElsewhere => {
                "The job sent the placeholder of a secret (`--secret NAME@HOST`) to a host the \
                 secret is not for. The job never holds a secret's value, only a random string \
                 of its shape, and vetto's proxy puts the value in requests to the secret's \
                 hosts alone, so what left is worthless; but a program that reads a token from \
                 the environment and sends it to a host of its own choosing is the shape of a \
                 credential stealer (Shai-Hulud sent npm tokens to GitHub repositories it \
                 created). vetto sees the placeholder where it can read the request: a \
                 plain-HTTP request, the first bytes of an unencrypted connection, and any \
                 request on a connection the proxy reads (another secret's host, or a host a \
                 method and path rule names); inside TLS to any other host it cannot."
            }
        }
    }

    /// The exact policy change that would allow it, and why you may not want
    /// to make it. Markdown.
    pub fn help_markdown(self) -> &'static str {
        match self {
            RuleId::FsWriteDenied => {
                "If the job legitimately writes there, make the path writable in `vetto.toml`:\n\n\
                 ```toml\n[filesystem]\nwrite = [\"<path>\"]\n```\n\n\
                 or pass `--allow-write <path>`. Prefer the narrowest directory: a writable home \
                 or a writable parent of the project lets a dependency plant code that runs later.\n\n\
                 A package manager's own cache (`~/.cargo/registry`, `~/.npm`, `~/.cache/pip`, \
                 `~/go/pkg/mod`, …) is never the answer: the next build outside the sandbox \
                 trusts what a job put there. Give the tool a vetto-owned cache instead \
                 (every toolchain preset has one, see docs/caches.md):\n\n\
                 ```toml\n[filesystem]\ncaches = [\"cargo\"]\n```"
            }
            RuleId::FsReadDenied => {
                "If the job legitimately reads it, make the path readable in `vetto.toml`:\n\n\
                 ```toml\n[filesystem]\nread = [\"<path>\"]\n```\n\n\
                 or pass `--allow-read <path>`. Everything readable is also exfiltrable when the \
                 network is open: do not add your home directory."
            }
            RuleId::SecretReadDenied => {
                "Masked secrets stay masked unless you remove the mask (a mask wins over a \
                 read rule for the same path). If one step truly needs a credential, give that \
                 step its own policy that lists what it needs instead of extending `default`:\n\n\
                 ```toml\n[filesystem]\nread = [\"/usr\", \"/etc\", \"${PROJECT}\", \"~/.npmrc\"]\n```\n\n\
                 Think twice: a build step that reads `~/.ssh` or `~/.aws` is the classic shape \
                 of a credential stealer (at FULL vetto names the process and the package that \
                 tried; at FS-ONLY Landlock refuses the read without vetto seeing it)."
            }
            RuleId::GitPersistenceBlocked => {
                "Jobs should not need to change hooks or the repository config. If a tool really \
                 installs hooks (husky, pre-commit), run that install outside vetto: the \
                 `default` preset protects these paths, and a protection wins over a `write` \
                 rule for the same path. A hook runs with the developer's full rights on the \
                 next `git commit`."
            }
            RuleId::PersistencePlanted => {
                "A build does not need to leave a repository or an editor task behind, and what \
                 it changed is already put back. To keep one such change in later sessions, name \
                 its path in the policy (`[persistence] keep = [\"${PROJECT}/.githooks/pre-commit\"]`): \
                 it is then left as the job made it and recorded as expected — and whatever \
                 the job writes there runs outside the sandbox next time. Look at the reported path before you run `git status` in it \
                 or open the folder in an editor (`git -c core.fsmonitor= status` and \
                 `git config -l --show-origin` inside it are safe ways to look), and delete it if \
                 you did not expect it. If a step really clones repositories into the project \
                 (`pip install -e git+…`), clone them outside vetto or into `$TMPDIR`. When an \
                 agent was asked to change a hook, an editor task or its own settings, review the \
                 change (`git diff`; for the agent's settings, the `.vetto-planted-…` copy vetto \
                 names) and keep it yourself: what runs on your machine outside the sandbox is \
                 your decision, not the job's."
            }
            RuleId::CiControlFileBlocked => {
                "Write step outputs from a separate, trusted step instead. Allowing it:\n\n\
                 ```toml\n[filesystem]\nwrite = [\"<the file $GITHUB_OUTPUT names>\"]\n```\n\n\
                 Never allow `GITHUB_ENV` or `GITHUB_PATH`: a line written there changes the \
                 environment of every later step, including the ones that hold secrets."
            }
            RuleId::UnixSocketDenied => {
                "If the job needs the socket (for example a Docker build), allow that one socket \
                 (or `--allow-unix PATH`; it must exist when the session starts):\n\n\
                 ```toml\n[network]\nunix = [\"/var/run/docker.sock\"]\n```\n\n\
                 vetto allows the socket found there at start, at every tier; a socket bound \
                 there later, or another one next to it, stays refused. \
                 Access to the Docker socket is root on the host, and the ssh-agent socket signs \
                 as you: the sandbox no longer contains a job that has either."
            }
            RuleId::NetSocketDenied => {
                "If the job needs the network, open it for the step that needs it (a dependency \
                 install), not for the whole pipeline:\n\n\
                 ```toml\n[network]\nmode = \"host\"\n```\n\n\
                 or `--net host`. That opens everything: a dependency can then send anything it \
                 could read anywhere. Filtered egress (`[network] allow`, `--allow-domain`, \
                 docs/network.md) carries TCP to named hosts only: raw and packet sockets stay \
                 refused, and UDP reaches nothing but vetto's DNS stub (at FS-ONLY, where user \
                 namespaces exist, a UDP socket comes from a network namespace that leads \
                 nowhere; without them it is refused and recorded here). Check who asked first: unexpected network use by a dependency is \
                 the usual sign of exfiltration."
            }
            RuleId::NetEgressBlocked => {
                "Check who asked first: an unexpected host contacted by a dependency is the \
                 usual sign of exfiltration. If the job needs that host, name it, on the port it \
                 needs, through vetto's proxy, for every program of the job:\n\n\
                 ```toml\n[network]\nallow = [\"registry.npmjs.org\", \"git.example.com:22\", \"10.1.2.0/24:5432\"]\n```\n\n\
                 or `--allow-domain registry.npmjs.org` (docs/network.md). A name without a port \
                 allows 80 and 443; an address without a name needs an ip rule \
                 (`\"10.1.2.0/24:5432\"`). `vetto policy explain HOST[:PORT]` says which rule \
                 decides, and `vetto policy suggest` proposes the entries from an `--audit` run. \
                 Never allow what your `deny` list names or the metadata address: it hands out \
                 the machine's credentials. `mode = \"host\"` (`--net host`) opens everything."
            }
            RuleId::SyscallDenied => {
                "There is no policy switch for these calls: builds and tests do not need them, and \
                 allowing them would let the job leave the sandbox. If a tool needs one (a \
                 debugger needs ptrace), run it outside vetto."
            }
            RuleId::ProcessEscaped => {
                "Make the job wait for the processes it starts (stop background servers at the \
                 end of the step). There is no policy switch: vetto always kills what outlives \
                 the job."
            }
            RuleId::LimitTimeout => {
                "If the job needs longer, raise the limit:\n\n```toml\n[limits]\ntimeout = \"30m\"\n```\n\n\
                 or `--timeout 30m`. A hung job is often waiting on the network that the policy \
                 turned off."
            }
            RuleId::LimitMemory => {
                "If the job needs more memory, raise the limit:\n\n```toml\n[limits]\nmax_memory = \"4GiB\"\n```\n\n\
                 or `--max-memory 4GiB`."
            }
            RuleId::LimitProcs => {
                "If the build needs more processes, raise the limit:\n\n```toml\n[limits]\nmax_procs = 4096\n```\n\n\
                 or `--max-procs 4096`. A limit protects the runner from fork bombs."
            }
            RuleId::SecretEnvWithheld => {
                "If the job needs the variable, pass it explicitly:\n\n\
                 ```toml\n[env]\npass_secret = [\"<NAME>\"]\n```\n\n\
                 or `--env-pass <NAME>`. Every dependency that runs in the job can read it."
            }
            RuleId::SecretSentElsewhere => {
                "There is no switch that lets it through: the value never goes to another host. \
                 If the job really sends this token to the host named, that host is one of the \
                 secret's:\n\n\
                 ```toml\n[secrets]\nNPM_TOKEN = [\"registry.npmjs.org\", \"<the host>\"]\n```\n\n\
                 or `--secret NAME@HOST1,HOST2`. Look at the process and package first: a \
                 dependency that reads a token from the environment and sends it to a host of \
                 its own is stealing it."
            }
        }
    }

    /// Plain-text help (SARIF `help.text`).
    pub fn help_text(self) -> String {
        self.help_markdown()
            .replace("```toml\n", "")
            .replace("\n```", "")
            .replace('`', "")
    }

    /// GitHub's `security-severity` (0.0–10.0; ≥ 9 critical, ≥ 7 high,
    /// ≥ 4 medium).
    pub fn security_severity(self) -> f64 {
        match self {
            RuleId::SecretReadDenied
            | RuleId::CiControlFileBlocked
            | RuleId::SecretSentElsewhere => 9.0,
            RuleId::GitPersistenceBlocked
            | RuleId::PersistencePlanted
            | RuleId::UnixSocketDenied => 8.5,
            RuleId::SyscallDenied | RuleId::ProcessEscaped => 8.0,
            RuleId::NetEgressBlocked | RuleId::NetSocketDenied => 7.0,
            RuleId::FsWriteDenied => 6.0,
            RuleId::FsReadDenied => 5.0,
            RuleId::LimitProcs => 4.0,
            RuleId::LimitTimeout | RuleId::LimitMemory => 2.0,
            RuleId::SecretEnvWithheld => 1.0,
        }
    }

    pub fn level(self) -> Level {
        match self.security_severity() {
            s if s >= 7.0 => Level::Error,
            s if s >= 4.0 => Level::Warning,
            _ => Level::Note,
        }
    }

    /// The coarse class the reports group by.
    pub fn class(self) -> &'static str {
        match self {
            RuleId::FsWriteDenied | RuleId::FsReadDenied => "filesystem",
            RuleId::SecretReadDenied | RuleId::SecretEnvWithheld | RuleId::SecretSentElsewhere => {
                "secrets"
            }
            RuleId::GitPersistenceBlocked
            | RuleId::PersistencePlanted
            | RuleId::CiControlFileBlocked => "persistence",
            RuleId::UnixSocketDenied | RuleId::NetSocketDenied | RuleId::NetEgressBlocked => {
                "network"
            }
            RuleId::SyscallDenied | RuleId::ProcessEscaped => "process",
            RuleId::LimitTimeout | RuleId::LimitMemory | RuleId::LimitProcs => "limits",
        }
    }

    /// SARIF `properties.tags`.
    pub fn tags(self) -> Vec<&'static str> {
        let mut tags = vec!["security", "sandbox", self.class()];
        match self {
            RuleId::SecretReadDenied | RuleId::SecretEnvWithheld => tags.push("credentials"),
            RuleId::SecretSentElsewhere => {
                tags.push("credentials");
                tags.push("exfiltration");
            }
            RuleId::GitPersistenceBlocked
            | RuleId::PersistencePlanted
            | RuleId::CiControlFileBlocked => tags.push("supply-chain"),
            RuleId::NetEgressBlocked | RuleId::NetSocketDenied => tags.push("exfiltration"),
            _ => {}
        }
        tags
    }

    pub fn docs_url(self) -> String {
        format!("{DOCS_BASE}{}.md", self.as_str())
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RuleId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RuleId::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                let all: Vec<_> = RuleId::ALL.iter().map(|r| r.as_str()).collect();
                format!("unknown rule id `{s}`; expected one of: {}", all.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn rule_ids_are_stable() {
        let ids: Vec<_> = RuleId::ALL.iter().map(|r| r.as_str()).collect();
        insta::assert_yaml_snapshot!(ids);
    }

    #[test]
    fn docs_base_is_under_the_homepage() {
        assert!(DOCS_BASE.starts_with(HOMEPAGE));
    }

    #[test]
    fn rule_ids_are_unique_and_round_trip() {
        let ids: HashSet<_> = RuleId::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(ids.len(), RuleId::ALL.len());
        for r in RuleId::ALL {
            assert_eq!(r.as_str().parse::<RuleId>(), Ok(r));
            let json = serde_json::to_string(&r).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert!(!r.help_markdown().is_empty() && !r.full_description().is_empty());
            assert!((0.0..=10.0).contains(&r.security_severity()));
        }
    }

    #[test]
    fn every_rule_has_a_docs_page() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/rules");
        for r in RuleId::ALL {
            let page = dir.join(format!("{}.md", r.as_str()));
            let expected = docs_page(r);
            if std::env::var_os("VETTO_BLESS").is_some() {
                let _ = std::fs::create_dir_all(&dir);
                let _ = std::fs::write(&page, &expected);
            }
            let actual = std::fs::read_to_string(&page).unwrap_or_default();
            assert_eq!(
                actual,
                expected,
                "{} is out of date; regenerate with VETTO_BLESS=1 cargo test every_rule_has_a_docs_page",
                page.display()
            );
        }
    }

    #[test]
    fn rules_index_lists_every_rule() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/rules/README.md");
        let mut expected = String::from(
            "# Rule ids\n\n<!-- generated from src/events/rule_id.rs by `VETTO_BLESS=1 cargo test rules_index`; edit there -->\n\n\
             Every violation vetto records has one of these stable ids (the SARIF `ruleId`).\n\n\
             | id | class | severity | what happened |\n|---|---|---:|---|\n",
        );
        for r in RuleId::ALL {
            expected.push_str(&format!(
                "| [`{id}`]({id}.md) | {} | {:.1} | {} |\n",
                r.class(),
                r.security_severity(),
                r.description(),
                id = r.as_str()
            ));
        }
        if std::env::var_os("VETTO_BLESS").is_some() {
            let _ = std::fs::write(&path, &expected);
        }
        assert_eq!(std::fs::read_to_string(&path).unwrap_or_default(), expected);
    }

    fn docs_page(r: RuleId) -> String {
        format!(
            "# `{id}`\n\n<!-- generated from src/events/rule_id.rs by `VETTO_BLESS=1 cargo test every_rule_has_a_docs_page`; edit there -->\n\n\
             **{desc}.**\n\n| | |\n|---|---|\n| class | {class} |\n| SARIF level | {level:?} |\n| security-severity | {sev:.1} |\n| tags | {tags} |\n\n\
             ## What happened\n\n{full}\n\n## How to allow it, and why you may not want to\n\n{help}\n",
            id = r.as_str(),
            desc = r.description(),
            class = r.class(),
            level = r.level(),
            sev = r.security_severity(),
            tags = r.tags().join(", "),
            full = r.full_description(),
            help = r.help_markdown(),
        )
    }
}
