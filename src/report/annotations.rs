//! GitHub Actions workflow commands: annotations for the top findings, and
//! neutralisation of workflow commands forged by the job's own output.
//!
//! The runner reads commands from every line a step prints: `::cmd k=v::data`
//! at the start of a line, and the legacy `##[cmd k=v;]data` anywhere in a
//! line. A sandboxed job that can print `::add-mask::`, `::stop-commands::`,
//! `::add-path::` or `##[set-env name=X;]…` could hide output or (where
//! unsafe commands are enabled) change later steps. vetto, which sits
//! outside the sandbox, rewrites such lines before they reach the runner.

use std::borrow::Cow;

use super::Model;
use super::sarif::locate;
use crate::events::rule_id::Level;

/// How many findings become annotations (GitHub shows at most 10 errors and
/// 10 warnings per step anyway).
pub const TOP: usize = 10;

/// Escape workflow-command data (the part after `::`).
pub fn escape_data(s: &str) -> String {
    s.replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escape a workflow-command property value (`file=`, `title=` …).
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// `::error file=…,line=…,title=…::message` lines for the top findings.
pub fn render(model: &Model, top: usize) -> Vec<String> {
    model
        .findings
        .iter()
        .take(top)
        .map(|f| {
            let loc = locate(model, f);
            let v = &f.violation;
            let cmd = match v.rule.level() {
                Level::Error => "error",
                Level::Warning => "warning",
                Level::Note => "notice",
            };
            let roots = model.start.roots();
            let target = match v.target.path() {
                Some(p) => roots.normalise(p),
                None => v.target.display(),
            };
            let who = match &v.attribution {
                Some(p) => p.display(),
                None => roots.normalise(&v.process.exe),
            };
            let times = if f.count > 1 {
                format!(" ({}×)", f.count)
            } else {
                String::new()
            };
            format!(
                "::{cmd} file={},line={},title={}::{}",
                escape_property(&loc.path),
                loc.line,
                escape_property(&format!("vetto: {}", v.rule.as_str())),
                escape_data(&format!(
                    "{target} by {who}{times} — {}",
                    v.rule.description()
                )),
            )
        })
        .collect()
}

/// Rewrite one line of job output so the runner cannot read a workflow
/// command in it; other lines are returned unchanged. A zero-width space
/// breaks the `::`/`##[` marker while the line still reads the same.
pub fn neutralise_line(line: &str) -> Cow<'_, str> {
    let trimmed = line.trim_start();
    let starts_command = trimmed.starts_with("::");
    let legacy = line.contains("##[");
    if !starts_command && !legacy {
        return Cow::Borrowed(line);
    }
    let mut out = line.to_string();
    if legacy {
        out = out.replace("##[", "#\u{200B}#[");
    }
    if starts_command {
        let at = out.len() - out.trim_start().len();
        out.replace_range(at..at + 2, ":\u{200B}:");
    }
    Cow::Owned(out)
}

/// Copy the job's output from `input` to `output` line by line,
/// neutralising workflow commands ([`neutralise_line`]). Bytes that are not
/// UTF-8 pass through untouched; a last line without a newline is copied
/// too. Returns the number of bytes read.
pub fn copy_neutralised(
    mut input: impl std::io::BufRead,
    mut output: impl std::io::Write,
) -> std::io::Result<u64> {
    let mut line = Vec::with_capacity(4096);
    let mut total = 0u64;
    loop {
        line.clear();
        let n = input.read_until(b'\n', &mut line)?;
        if n == 0 {
            break;
        }
        total += n as u64;
        match std::str::from_utf8(&line) {
            Ok(text) => output.write_all(neutralise_line(text).as_bytes())?,
            Err(_) => {
                // Neutralise on a lossy view only if it holds a command;
                // otherwise keep the bytes exactly.
                let lossy = String::from_utf8_lossy(&line);
                match neutralise_line(&lossy) {
                    Cow::Borrowed(_) => output.write_all(&line)?,
                    Cow::Owned(fixed) => output.write_all(fixed.as_bytes())?,
                }
            }
        }
        output.flush()?;
    }
    Ok(total)
}

/// `::stop-commands::TOKEN` / `::TOKEN::`: the runner ignores every command
/// between the two lines. vetto prints the first before the job and the
/// second after it, with a token the job cannot guess, as a second wall
/// behind [`neutralise_line`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopCommands {
    token: String,
}

impl StopCommands {
    pub fn new() -> Self {
        use std::hash::{BuildHasher, RandomState};
        let a = RandomState::new().hash_one(std::time::SystemTime::now());
        let b = RandomState::new().hash_one(std::process::id());
        StopCommands {
            token: format!("vetto-{a:016x}{b:016x}"),
        }
    }

    pub fn begin(&self) -> String {
        format!("::stop-commands::{}", self.token)
    }

    pub fn end(&self) -> String {
        format!("::{}::", self.token)
    }
}

impl Default for StopCommands {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn forged_set_env_and_add_path_are_neutralised() {
        for forged in [
            "::set-env name=LD_PRELOAD::/tmp/evil.so",
            "::add-path::/tmp/evil",
            "   ::add-mask::",
            "::stop-commands::abc",
            "::set-output name=x::y",
            "::error file=a::fake alert",
        ] {
            let out = neutralise_line(forged);
            assert!(!out.trim_start().starts_with("::"), "{out}");
        }
    }

    #[test]
    fn legacy_commands_anywhere_in_a_line_are_neutralised() {
        let out = neutralise_line("progress 50% ##[set-env name=PATH;]/tmp/evil");
        assert!(!out.contains("##["), "{out}");
    }

    #[test]
    fn job_output_is_copied_with_forged_commands_neutralised() {
        let input = b"building\n::add-mask::secret\n\xff\xfe binary\nlast ::x";
        let mut out = Vec::new();
        let n = copy_neutralised(&input[..], &mut out).unwrap_or_default();
        assert_eq!(n, input.len() as u64);
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("building\n:\u{200B}:add-mask::secret\n"),
            "{text}"
        );
        assert!(out.windows(2).any(|w| w == b"\xff\xfe"), "binary kept");
        assert!(text.ends_with("last ::x"));
    }

    #[test]
    fn ordinary_output_is_untouched() {
        for line in ["Compiling foo v1.0", "a::b", "  error: x", "std::io::Error"] {
            assert!(matches!(neutralise_line(line), Cow::Borrowed(_)), "{line}");
        }
    }

    #[test]
    fn annotation_properties_are_escaped() {
        assert_eq!(escape_property("a:b,c%\n"), "a%3Ab%2Cc%25%0A");
        assert_eq!(escape_data("50%\r\nx"), "50%25%0D%0Ax");
    }

    #[test]
    fn top_findings_become_annotations_with_repo_files() {
        let lines = render(&fixture::attack_model(), 3);
        insta::assert_snapshot!(lines.join("\n"));
        assert!(
            lines
                .iter()
                .all(|l| l.starts_with("::error file=") && !l.contains('\n'))
        );
    }

    #[test]
    fn stop_commands_tokens_are_unpredictable() {
        let (a, b) = (StopCommands::new(), StopCommands::new());
        assert_ne!(a, b);
        assert!(a.begin().starts_with("::stop-commands::vetto-"));
    }
}
