//! GitHub Actions workflow commands: annotations for the top findings.
//! (Those the job forges in its output are broken on the way out by
//! [`crate::workflow_commands`].)
//!
//! The runner reads the output of a step line by line (.NET's
//! `StreamReader.ReadLine`: a line ends at a line feed, a carriage return
//! or both) and executes `::cmd k=v::data` at the start of a line (after
//! blanks), and the legacy `##[cmd k=v;]data` anywhere in a line. A
//! sandboxed job that can print `::add-mask::`, `::stop-commands::`,
//! `::add-path::` or `##[set-env name=X;]…` could hide output, turn off
//! command processing, or (where unsafe commands are enabled) change later
//! steps. vetto, which sits outside the sandbox, rewrites such lines before
//! they reach the runner ([`Neutraliser`]); what vetto prints itself from
//! the job's side is escaped ([`escape_data`], [`crate::text`]).
//!
//! vetto does not fence the job's output with its own
//! `::stop-commands::TOKEN` … `::TOKEN::`: the runner reads stdout and
//! stderr on two threads and takes the stderr lines of each batch first,
//! so the fence cannot be placed before or after the job's stderr; and a
//! vetto killed inside the fence (cancellation, the step's timeout, the
//! OOM killer) would leave command processing off for the rest of the
//! step, so that a later `::add-mask::` of the workflow's own script is
//! ignored and its secret printed in clear. The neutraliser covers both
//! streams at every position and fails closed.

use std::io::Write;

use super::Model;
use super::locate::Locator;
use crate::events::rule_id::Level;

/// How many findings become annotations (GitHub shows at most 10 errors and
/// 10 warnings per step anyway).
pub const TOP: usize = 10;

/// Escape workflow-command data (the part after `::`): control and
/// invisible characters shown visibly ([`crate::text::escape`]: an ESC or
/// a C1 byte would reach the raw log and the terminal of whoever reads
/// it; the runner un-escapes only `%25`, `%0D` and `%0A`), then `%`, CR
/// and LF as GitHub's toolkit escapes them.
pub fn escape_data(s: &str) -> String {
    crate::text::escape(s)
        .replace('%', "%25")
        .replace('\r', "%0D")
        .replace('\n', "%0A")
}

/// Escape a workflow-command property value (`file=`, `title=` …).
pub fn escape_property(s: &str) -> String {
    escape_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// `::error file=…,line=…,title=…::message` lines for the top findings.
pub fn render(model: &Model, top: usize) -> Vec<String> {
    let at = Locator::new(model);
    model
        .findings
        .iter()
        .take(top)
        .map(|f| {
            let loc = at.locate(f);
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

/// Print [`render`]'s lines to `out` (vetto's stdout, which the runner
/// reads). They begin on a line of their own: the job may have left its
/// last line open, and `x::error …` is no command.
pub fn print(out: &mut impl Write, model: &Model, top: usize) -> std::io::Result<()> {
    writeln!(out)?;
    for line in render(model, top) {
        writeln!(out, "{line}")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn annotation_properties_are_escaped() {
        assert_eq!(escape_property("a:b,c%\n"), "a%3Ab%2Cc%25\\n");
        assert_eq!(escape_data("50%\r\nx"), "50%25\\r\\nx");
    }

    #[test]
    fn annotation_data_shows_escape_sequences_and_line_breaks() {
        let data = escape_data("/work/a\x1b]0;pwned\x07\u{9b}2J\n::warning::x\r%");
        assert_eq!(
            data,
            "/work/a\\x1b]0;pwned\\x07\\u{9b}2J\\n::warning::x\\r%25"
        );
        assert!(!data.chars().any(char::is_control));
        let prop = escape_property("t\x1b:1,2");
        assert_eq!(prop, "t\\x1b%3A1%2C2");
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
}
