//! The Windows AppContainer launcher's pure parts, compiled and tested on
//! every OS: the command line (Windows quoting), the environment block,
//! the ACEs a grant plan becomes, the Job Object's limits, and the errors
//! (each with its exit status). The launcher (`launcher.rs`, Windows only)
//! applies these and decides nothing.

use std::path::PathBuf;

use crate::plan::appcontainer::{
    AclDeny, AclGrant, Capability, DenyAccess, GrantAccess, GrantPlan,
};

/// Access masks (winnt.h), written out so the ACE plan is data on every
/// OS; `launcher.rs` asserts at compile time that they match windows-sys.
pub mod mask {
    pub const FILE_GENERIC_READ: u32 = 0x0012_0089;
    pub const FILE_GENERIC_WRITE: u32 = 0x0012_0116;
    pub const FILE_GENERIC_EXECUTE: u32 = 0x0012_00A0;
    pub const DELETE: u32 = 0x0001_0000;
    pub const FILE_ALL_ACCESS: u32 = 0x001F_01FF;
    /// `FILE_ADD_FILE` on a directory.
    pub const FILE_WRITE_DATA: u32 = 0x0002;
    /// `FILE_ADD_SUBDIRECTORY` on a directory.
    pub const FILE_APPEND_DATA: u32 = 0x0004;
    pub const FILE_WRITE_EA: u32 = 0x0010;
    pub const FILE_DELETE_CHILD: u32 = 0x0040;
    pub const FILE_WRITE_ATTRIBUTES: u32 = 0x0100;
    pub const WRITE_DAC: u32 = 0x0004_0000;
    pub const WRITE_OWNER: u32 = 0x0008_0000;
}

/// Job Object limit flags (winnt.h), checked against windows-sys likewise.
pub mod job_flag {
    pub const ACTIVE_PROCESS: u32 = 0x0000_0008;
    pub const JOB_MEMORY: u32 = 0x0000_0200;
    pub const DIE_ON_UNHANDLED_EXCEPTION: u32 = 0x0000_0400;
    pub const KILL_ON_JOB_CLOSE: u32 = 0x0000_2000;
}

/// The well-known capability SIDs, as strings for `ConvertStringSidToSidW`.
pub fn capability_sid(cap: Capability) -> &'static str {
    match cap {
        Capability::InternetClient => "S-1-15-3-1",
        Capability::PrivateNetworkClientServer => "S-1-15-3-3",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AceMode {
    Allow,
    Deny,
}

/// One ACE to add for the container's SID, with these rights.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct AceEntry {
    pub path: PathBuf,
    pub mode: AceMode,
    #[serde(serialize_with = "hex")]
    pub mask: u32,
    /// Container- and object-inherit (a directory); none on a file.
    pub inherit: bool,
}

/// The deny ACE a planned deny becomes, given whether its path is a
/// directory.
pub fn deny_ace_for(deny: &AclDeny, is_dir: bool) -> AceEntry {
    use mask::*;
    let (mask, inherit) = match deny.access {
        DenyAccess::All => (FILE_ALL_ACCESS, is_dir),
        DenyAccess::Write => (
            FILE_WRITE_DATA
                | FILE_APPEND_DATA
                | FILE_WRITE_EA
                | FILE_WRITE_ATTRIBUTES
                | FILE_DELETE_CHILD
                | DELETE
                | WRITE_DAC
                | WRITE_OWNER,
            is_dir,
        ),
        DenyAccess::Delete => (DELETE, false),
        DenyAccess::Create => (FILE_WRITE_DATA | FILE_APPEND_DATA, false),
    };
    AceEntry {
        path: deny.path.clone(),
        mode: AceMode::Deny,
        mask,
        inherit,
    }
}

fn hex<S: serde::Serializer>(mask: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{mask:#010x}"))
}

/// The ACE a grant becomes, given whether its path is a directory. No
/// `FILE_DELETE_CHILD`: a child is deleted only through its own `DELETE`.
pub fn ace_for(grant: &AclGrant, is_dir: bool) -> AceEntry {
    let read = mask::FILE_GENERIC_READ | mask::FILE_GENERIC_EXECUTE;
    let mask = match grant.access {
        GrantAccess::Read => read,
        GrantAccess::Write => read | mask::FILE_GENERIC_WRITE | mask::DELETE,
    };
    AceEntry {
        path: grant.path.clone(),
        mode: AceMode::Allow,
        mask,
        inherit: is_dir,
    }
}

/// The Job Object's limits from the grant plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct JobLimits {
    /// `JOBOBJECT_BASIC_LIMIT_INFORMATION::LimitFlags`.
    pub flags: u32,
    /// `--max-procs`: processes alive at once in the job (a new one fails
    /// to start beyond it).
    pub active_processes: Option<u32>,
    /// `--max-memory`: committed memory of the whole job, a hard limit
    /// (an allocation beyond it fails; nothing is killed for it).
    pub job_memory: Option<u64>,
    /// `--timeout`, for the wait (`u32::MAX` is `INFINITE`).
    pub wait_ms: u32,
}

impl JobLimits {
    pub fn from_plan(plan: &GrantPlan) -> JobLimits {
        let mut flags = job_flag::KILL_ON_JOB_CLOSE | job_flag::DIE_ON_UNHANDLED_EXCEPTION;
        if plan.max_processes.is_some() {
            flags |= job_flag::ACTIVE_PROCESS;
        }
        if plan.max_memory_bytes.is_some() {
            flags |= job_flag::JOB_MEMORY;
        }
        JobLimits {
            flags,
            active_processes: plan.max_processes,
            job_memory: plan.max_memory_bytes,
            // One below INFINITE: a timeout of 49.7 days still ends.
            wait_ms: plan
                .timeout_ms
                .map_or(u32::MAX, |ms| u32::try_from(ms).unwrap_or(u32::MAX - 1)),
        }
    }
}

/// A name for the session's AppContainer profile (at most 64 characters).
pub fn profile_name(pid: u32, nonce: &str) -> String {
    let mut name = format!("vetto.session.{pid}.{nonce}");
    name.truncate(64);
    name
}

/// What the command line or the environment cannot carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    #[error("no command")]
    Empty,
    #[error("argument {index} holds a NUL character, which a Windows command line cannot carry")]
    Nul { index: usize },
    #[error(
        "the program name holds a double quote, which a Windows command line cannot carry in its first word"
    )]
    QuoteInProgram,
    #[error("environment variable {name:?} holds a NUL or `=` in its name, or a NUL in its value")]
    Environment { name: String },
}

const QUOTE: u16 = b'"' as u16;
const BACKSLASH: u16 = b'\\' as u16;

/// The command line `CreateProcessW` is given, in UTF-16, such that the
/// Microsoft C runtime's parser (and `CommandLineToArgvW`) gives back
/// exactly `args`. The program name is always quoted: its first word is
/// parsed without escapes, so it may not hold a quote itself.
pub fn command_line(args: &[Vec<u16>]) -> Result<Vec<u16>, EncodeError> {
    let (program, rest) = args.split_first().ok_or(EncodeError::Empty)?;
    if let Some(index) = args.iter().position(|a| a.contains(&0)) {
        return Err(EncodeError::Nul { index });
    }
    if program.contains(&QUOTE) {
        return Err(EncodeError::QuoteInProgram);
    }
    let mut line = Vec::with_capacity(args.iter().map(|a| a.len() * 2 + 3).sum());
    line.push(QUOTE);
    line.extend_from_slice(program);
    line.push(QUOTE);
    for arg in rest {
        line.push(u16::from(b' '));
        quote_argument(arg, &mut line);
    }
    Ok(line)
}

fn quote_argument(arg: &[u16], out: &mut Vec<u16>) {
    let plain = !arg.is_empty()
        && !arg
            .iter()
            .any(|&c| matches!(c, 0x20 | 0x09 | 0x0A | 0x0B) || c == QUOTE);
    if plain {
        out.extend_from_slice(arg);
        return;
    }
    out.push(QUOTE);
    let mut backslashes = 0usize;
    for &c in arg {
        if c == BACKSLASH {
            backslashes += 1;
            continue;
        }
        if c == QUOTE {
            // Backslashes before a quote are escapes: double them, then
            // escape the quote itself.
            out.extend(std::iter::repeat_n(BACKSLASH, backslashes * 2 + 1));
        } else {
            out.extend(std::iter::repeat_n(BACKSLASH, backslashes));
        }
        backslashes = 0;
        out.push(c);
    }
    // Before the closing quote, they would escape it: doubled.
    out.extend(std::iter::repeat_n(BACKSLASH, backslashes * 2));
    out.push(QUOTE);
}

/// The `CREATE_UNICODE_ENVIRONMENT` block: `NAME=value` entries, each
/// ended by a NUL, and a NUL after the last.
pub fn environment_block(vars: &[(String, String)]) -> Result<Vec<u16>, EncodeError> {
    let mut block = Vec::new();
    for (name, value) in vars {
        if name.is_empty() || name.contains(['\0', '=']) || value.contains('\0') {
            return Err(EncodeError::Environment { name: name.clone() });
        }
        block.extend(name.encode_utf16());
        block.push(u16::from(b'='));
        block.extend(value.encode_utf16());
        block.push(0);
    }
    if block.is_empty() {
        block.push(0);
    }
    block.push(0);
    Ok(block)
}

/// Why the AppContainer launcher did not run the job.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    #[error(
        "--tier appcontainer needs Windows AppContainer (it exists only on Windows; this is {os})"
    )]
    NotWindows { os: &'static str },
    #[error(
        "`vetto ci` filters the job's output; the AppContainer launcher only lets it inherit vetto's (use `vetto run`)"
    )]
    OutputFilter,
    #[error(
        "--audit records what a policy would refuse; the AppContainer launcher observes nothing to record"
    )]
    Audit,
    #[error("--report-dir: the AppContainer launcher writes no session log to make reports from")]
    Reports,
    #[error("the command: {0}")]
    Encode(#[from] EncodeError),
    #[error("cannot create the session's AppContainer profile {name:?} ({op}: error {code:#010x})")]
    Profile {
        name: String,
        op: &'static str,
        code: u32,
    },
    #[error(
        "cannot grant the container {access} on {path:?} ({op}: error {code}); a grant whose ACL cannot be changed is refused"
    )]
    Grant {
        path: PathBuf,
        access: &'static str,
        op: &'static str,
        code: u32,
    },
    #[error(
        "LPAC (no access through ALL APPLICATION PACKAGES) is not available ({op}: error {code}); it needs Windows 10 1703 or later"
    )]
    Lpac { op: &'static str, code: u32 },
    #[error("cannot name the session's AppContainer profile: {reason}")]
    Random { reason: String },
    #[error("cannot make the capability SID {sid} (ConvertStringSidToSidW: error {code})")]
    Capability { sid: &'static str, code: u32 },
    #[error("cannot describe the container to CreateProcessW ({op}: error {code})")]
    Attribute { op: &'static str, code: u32 },
    #[error("cannot set up the Job Object ({op}: error {code})")]
    Job { op: &'static str, code: u32 },
    #[error("cannot start {program:?} in the AppContainer (CreateProcessW: error {code})")]
    Spawn { program: String, code: u32 },
    #[error("cannot wait for the job ({op}: error {code})")]
    Wait { op: &'static str, code: u32 },
}

impl LaunchError {
    /// Every one of them is a refusal: the job did not run.
    pub fn exit_status(&self) -> u8 {
        crate::exit::REFUSED
    }
}

/// What a failed `CreateProcessW` means for the contract: not found is
/// 127, not executable (or not allowed) 126, else `None` (a refusal).
pub fn exec_failure_status(code: u32) -> Option<u8> {
    const ERROR_FILE_NOT_FOUND: u32 = 2;
    const ERROR_PATH_NOT_FOUND: u32 = 3;
    const ERROR_ACCESS_DENIED: u32 = 5;
    const ERROR_BAD_EXE_FORMAT: u32 = 193;
    match code {
        ERROR_FILE_NOT_FOUND | ERROR_PATH_NOT_FOUND => Some(127),
        ERROR_ACCESS_DENIED | ERROR_BAD_EXE_FORMAT => Some(126),
        _ => None,
    }
}

/// What the Windows backend does not see, for `vetto doctor` and the
/// session's last words: the access checks that deny the job are not
/// reported by Windows to vetto.
pub const NOT_OBSERVED: &str = "violations are not observed under AppContainer: Windows denies the job's \
     accesses without telling vetto, so vetto names none (not observed, not absent)";

#[cfg(test)]
mod tests {
    #![expect(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn w(s: &str) -> Vec<u16> {
        s.encode_utf16().collect()
    }

    /// The Microsoft C runtime's argument parser (as documented for
    /// `CommandLineToArgvW`, "Parsing C command-line arguments", 2008+
    /// rules), the reference the quoting is checked against.
    fn parse(line: &[u16]) -> Vec<String> {
        let s: Vec<char> = String::from_utf16(line).unwrap().chars().collect();
        let mut i = 0;
        let mut args = Vec::new();
        // The program name: up to the closing quote, no escapes.
        let mut prog = String::new();
        if s.first() == Some(&'"') {
            i = 1;
            while i < s.len() && s[i] != '"' {
                prog.push(s[i]);
                i += 1;
            }
            i += 1;
        } else {
            while i < s.len() && !matches!(s[i], ' ' | '\t') {
                prog.push(s[i]);
                i += 1;
            }
        }
        args.push(prog);
        loop {
            while i < s.len() && matches!(s[i], ' ' | '\t') {
                i += 1;
            }
            if i >= s.len() {
                break;
            }
            let mut arg = String::new();
            let mut quoted = false;
            while i < s.len() {
                let c = s[i];
                if c == '\\' {
                    let start = i;
                    while i < s.len() && s[i] == '\\' {
                        i += 1;
                    }
                    let n = i - start;
                    if i < s.len() && s[i] == '"' {
                        arg.extend(std::iter::repeat_n('\\', n / 2));
                        if n % 2 == 1 {
                            arg.push('"');
                            i += 1;
                        }
                    } else {
                        arg.extend(std::iter::repeat_n('\\', n));
                    }
                    continue;
                }
                if c == '"' {
                    if quoted && s.get(i + 1) == Some(&'"') {
                        arg.push('"');
                        i += 2;
                        continue;
                    }
                    quoted = !quoted;
                    i += 1;
                    continue;
                }
                if !quoted && matches!(c, ' ' | '\t') {
                    break;
                }
                arg.push(c);
                i += 1;
            }
            args.push(arg);
        }
        args
    }

    #[test]
    fn hostile_arguments_come_back_exactly_as_given() {
        let cases: &[&[&str]] = &[
            &["C:\\Program Files\\Git\\bin\\git.exe", "status"],
            &["prog", ""],
            &["prog", "", "", "x"],
            &["prog", "a b", "c\td", "new\nline"],
            &["prog", "say \"hi\"", "\"", "\"\""],
            &["prog", "back\\slash", "trailing\\", "trailing\\\\"],
            &["prog", "C:\\dir\\", "a\\\"b", "a\\\\\"b", "\\\\\\\""],
            &["prog", "\" & calc.exe & \"", "x\" y", "%PATH%", "^&|<>"],
            &["C:\\a dir\\", "end\\"],
        ];
        for args in cases {
            let wide: Vec<Vec<u16>> = args.iter().map(|a| w(a)).collect();
            let line = command_line(&wide).unwrap();
            let back = parse(&line);
            assert_eq!(&back, args, "{:?}", String::from_utf16_lossy(&line));
        }
    }

    #[test]
    fn plain_arguments_stay_unquoted_and_the_program_is_quoted() {
        let line = command_line(&[w("cargo"), w("build"), w("--release")]).unwrap();
        assert_eq!(
            String::from_utf16(&line).unwrap(),
            "\"cargo\" build --release"
        );
        let line = command_line(&[w("p"), w("a b\\")]).unwrap();
        assert_eq!(String::from_utf16(&line).unwrap(), "\"p\" \"a b\\\\\"");
    }

    #[test]
    fn what_a_command_line_cannot_carry_is_refused() {
        assert_eq!(command_line(&[]), Err(EncodeError::Empty));
        assert_eq!(
            command_line(&[w("p"), w("a\0b")]),
            Err(EncodeError::Nul { index: 1 })
        );
        assert_eq!(
            command_line(&[w("p\"q"), w("x")]),
            Err(EncodeError::QuoteInProgram)
        );
    }

    #[test]
    fn the_environment_block_is_nul_separated_and_refuses_what_it_cannot_carry() {
        let block =
            environment_block(&[("A".into(), "1".into()), ("B".into(), "".into())]).unwrap();
        assert_eq!(String::from_utf16(&block).unwrap(), "A=1\0B=\0\0");
        assert_eq!(environment_block(&[]).unwrap(), vec![0, 0]);
        for bad in [("A=B", "1"), ("", "1"), ("A\0", "1"), ("A", "x\0y")] {
            assert!(
                environment_block(&[(bad.0.into(), bad.1.into())]).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn grants_and_masks_become_aces_inherited_only_by_directories() {
        let read = AclGrant {
            path: "C:/Users/dev/.cargo".into(),
            access: GrantAccess::Read,
        };
        let write = AclGrant {
            path: "C:/src/proj".into(),
            access: GrantAccess::Write,
        };
        let deny = |path: &str, access| AclDeny {
            path: path.into(),
            access,
        };
        let aces = vec![
            ace_for(&read, true),
            ace_for(&write, true),
            ace_for(&write, false),
            deny_ace_for(&deny("C:/src/proj/.env", DenyAccess::All), false),
            deny_ace_for(&deny("C:/src/proj/.git/hooks", DenyAccess::Write), true),
            deny_ace_for(&deny("C:/src/proj/.git", DenyAccess::Delete), true),
            deny_ace_for(&deny("C:/src/proj/.git", DenyAccess::Create), true),
        ];
        insta::assert_yaml_snapshot!("appcontainer_aces", aces);
        // Ancestors' denies are theirs alone, never inherited.
        assert!(!aces[5].inherit && !aces[6].inherit);
        // A protected path keeps its read rights (FILE_READ_DATA, 0x1).
        assert_eq!(aces[4].mask & 0x1, 0);
        // No FILE_DELETE_CHILD (0x40) granted: deleting a child takes its
        // own DELETE, which a protected path's deny takes away.
        assert!(
            aces.iter()
                .filter(|a| a.mode == AceMode::Allow)
                .all(|a| a.mask & mask::FILE_DELETE_CHILD == 0)
        );
        assert_eq!(aces[0].mask & mask::FILE_GENERIC_WRITE & !0x0012_0000, 0);
    }

    fn grant_plan(procs: Option<u32>, mem: Option<u64>, timeout_ms: Option<u64>) -> GrantPlan {
        GrantPlan {
            grants: vec![],
            denies: vec![],
            capabilities: vec![],
            max_processes: procs,
            max_memory_bytes: mem,
            timeout_ms,
        }
    }

    #[test]
    fn job_limits_follow_the_plan_and_always_kill_the_tree_on_close() {
        let none = JobLimits::from_plan(&grant_plan(None, None, None));
        assert_eq!(
            none.flags,
            job_flag::KILL_ON_JOB_CLOSE | job_flag::DIE_ON_UNHANDLED_EXCEPTION
        );
        assert_eq!(none.wait_ms, u32::MAX);
        let all = JobLimits::from_plan(&grant_plan(Some(16), Some(1 << 30), Some(90_000)));
        assert_eq!(
            all.flags & (job_flag::ACTIVE_PROCESS | job_flag::JOB_MEMORY),
            job_flag::ACTIVE_PROCESS | job_flag::JOB_MEMORY
        );
        assert_eq!(all.active_processes, Some(16));
        assert_eq!(all.job_memory, Some(1 << 30));
        assert_eq!(all.wait_ms, 90_000);
        let long = JobLimits::from_plan(&grant_plan(None, None, Some(u64::MAX)));
        assert_eq!(long.wait_ms, u32::MAX - 1, "a timeout is never INFINITE");
    }

    #[test]
    fn profile_names_fit_and_exit_statuses_follow_the_contract() {
        let name = profile_name(u32::MAX, &"f".repeat(80));
        assert_eq!(name.len(), 64);
        assert!(name.starts_with("vetto.session.4294967295."));
        assert_eq!(exec_failure_status(2), Some(127));
        assert_eq!(exec_failure_status(5), Some(126));
        assert_eq!(exec_failure_status(1450), None);
        assert_eq!(capability_sid(Capability::InternetClient), "S-1-15-3-1");
    }
}
