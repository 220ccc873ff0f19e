//! Diagnostics, cargo-deny style: every problem is collected with its
//! location, then all are rendered at once as `file:line:col: error: …`.

use std::fmt::{self, Write as _};
use std::ops::Range;

/// One problem in a policy source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file path as given, `policies/NAME.toml` for a preset, or the
    /// command-line option (`--timeout`).
    pub source: String,
    /// 1-based line and column (in characters), when the source is a file.
    pub location: Option<Location>,
    pub message: String,
    pub help: Option<String>,
}

/// Where in a file a diagnostic points, with the line's text for context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub line: u32,
    pub col: u32,
    /// The whole source line (without its newline).
    pub text: String,
    /// How many characters to underline (at least 1).
    pub width: usize,
}

/// Diagnostics quote the policy file (its lines, its keys and values), and
/// a policy can come from a pull request: every part is shown with
/// [`crate::text::escape`], so that a key like `"x\n::add-mask::…"` or an
/// escape sequence cannot start a line of the CI log or drive the terminal.
impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use crate::text::escape;
        let source = escape(&self.source);
        let message = escape(&self.message);
        match &self.location {
            Some(loc) => {
                writeln!(f, "{source}:{}:{}: error: {message}", loc.line, loc.col)?;
                let num = loc.line.to_string();
                let pad = " ".repeat(num.len());
                writeln!(f, "{pad} |")?;
                writeln!(f, "{num} | {}", escape(&loc.text))?;
                // Under the escaped text: as wide as the escapes.
                let before: String = loc
                    .text
                    .chars()
                    .take(loc.col.saturating_sub(1) as usize)
                    .collect();
                let marked: String = loc
                    .text
                    .chars()
                    .skip(loc.col.saturating_sub(1) as usize)
                    .take(loc.width)
                    .collect();
                let width = match escape(&marked).chars().count() {
                    0 => loc.width,
                    n => n + loc.width.saturating_sub(marked.chars().count()),
                };
                let lead = " ".repeat(escape(&before).chars().count());
                write!(f, "{pad} | {lead}{}", "^".repeat(width.max(1)))?;
            }
            None => write!(f, "{source}: error: {message}")?,
        }
        if let Some(help) = &self.help {
            write!(f, "\n  = help: {}", escape(help))?;
        }
        Ok(())
    }
}

/// A source text that spans refer to.
#[derive(Debug, Clone, Copy)]
pub struct SourceRef<'a> {
    pub name: &'a str,
    pub text: &'a str,
}

impl SourceRef<'_> {
    /// Line and column of a byte span; robust against spans that are out of
    /// range or not on a character boundary (it never panics).
    pub fn locate(&self, span: &Range<usize>) -> Location {
        let text = self.text;
        let start = char_floor(text, span.start);
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let line_end = text[start..].find('\n').map_or(text.len(), |i| start + i);
        let line = text[..start].matches('\n').count() + 1;
        let col = text[line_start..start].chars().count() + 1;
        let mut end = span.end.clamp(start, line_end);
        while end > start && !text.is_char_boundary(end) {
            end -= 1;
        }
        let line_text = text[line_start..line_end].trim_end_matches('\r');
        Location {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            col: u32::try_from(col).unwrap_or(u32::MAX),
            text: line_text.to_string(),
            width: text[start..end].chars().count().max(1),
        }
    }
}

/// `offset` clamped into `text` and moved back to a character boundary.
fn char_floor(text: &str, offset: usize) -> usize {
    let mut at = offset.min(text.len());
    while at > 0 && !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

/// Where each line of a source starts. A source's rules all need their
/// line and column (every rule keeps its origin), and finding each by
/// scanning the text from the start was most of the time a policy took to
/// load: with the index it is a binary search and a scan of one line.
pub struct LineIndex<'a> {
    text: &'a str,
    /// Byte offset of the start of each line; the first is 0.
    starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    pub fn new(text: &'a str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { text, starts }
    }

    /// The 1-based line and column (in characters) of a span's start,
    /// exactly as [`SourceRef::locate`] gives them.
    pub fn line_col(&self, span: &Range<usize>) -> (u32, u32) {
        let start = char_floor(self.text, span.start);
        // The first line starts at 0, so at least one start is <= `start`.
        let line = self.starts.partition_point(|&s| s <= start).max(1);
        let line_start = self.starts.get(line - 1).copied().unwrap_or(0);
        let col = self.text[line_start..start].chars().count() + 1;
        (
            u32::try_from(line).unwrap_or(u32::MAX),
            u32::try_from(col).unwrap_or(u32::MAX),
        )
    }
}

/// The collector every validation step pushes into.
#[derive(Debug, Default)]
pub struct Diags {
    list: Vec<Diagnostic>,
}

impl Diags {
    pub fn at(&mut self, src: SourceRef<'_>, span: &Range<usize>, message: impl Into<String>) {
        self.at_help(src, span, message, None::<String>);
    }

    pub fn at_help(
        &mut self,
        src: SourceRef<'_>,
        span: &Range<usize>,
        message: impl Into<String>,
        help: Option<impl Into<String>>,
    ) {
        self.list.push(Diagnostic {
            source: src.name.to_string(),
            location: Some(src.locate(span)),
            message: message.into(),
            help: help.map(Into::into),
        });
    }

    /// A problem without a file location (a command-line option, an I/O error).
    pub fn plain(
        &mut self,
        source: impl Into<String>,
        message: impl Into<String>,
        help: Option<String>,
    ) {
        self.list.push(Diagnostic {
            source: source.into(),
            location: None,
            message: message.into(),
            help,
        });
    }

    /// Source order: by source, then line and column (stable).
    pub fn sort(&mut self) {
        self.list.sort_by(|a, b| {
            let key = |d: &Diagnostic| d.location.as_ref().map(|l| (l.line, l.col));
            a.source.cmp(&b.source).then(key(a).cmp(&key(b)))
        });
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn len(&self) -> usize {
        self.list.len()
    }

    pub fn into_vec(self) -> Vec<Diagnostic> {
        self.list
    }

    /// All diagnostics, in source order, then a one-line count.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for d in &self.list {
            let _ = writeln!(out, "{d}\n");
        }
        let n = self.list.len();
        let _ = write!(
            out,
            "vetto: the policy has {n} error{}",
            if n == 1 { "" } else { "s" }
        );
        out
    }
}

/// The expected name closest to `got`, if it is close enough to be a typo.
pub fn did_you_mean<'a>(got: &str, expected: &[&'a str]) -> Option<&'a str> {
    let lower = got.to_ascii_lowercase();
    expected
        .iter()
        .map(|e| (strsim::damerau_levenshtein(&lower, e), *e))
        .filter(|(d, e)| *d <= (e.len() / 3).max(1) || (e.len() > 3 && lower.contains(e)))
        .min_by_key(|(d, _)| *d)
        .map(|(_, e)| e)
}

/// `a`, `b`, `c` for messages.
pub fn list(items: &[&str]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A policy from a pull request names a key with a line feed, a
    /// carriage return and an OSC sequence (TOML escapes make them real).
    #[test]
    fn a_policy_key_cannot_forge_a_workflow_command_in_a_diagnostic() {
        let text =
            "[filesystem]\n\"x\\n::error title=t::pwned\\r::add-mask::X\\u001b]0;p\\u0007\" = 1\n";
        let err = match crate::policy::check_text(text) {
            Err(e) => e.to_string(),
            Ok(()) => String::new(),
        };
        assert!(
            err.contains("x\\n::error title=t::pwned\\r::add-mask::X\\x1b]0;p\\x07"),
            "{err}"
        );
        assert!(
            err.split(['\n', '\r'])
                .all(|l| !l.trim_start().starts_with("::")),
            "{err}"
        );
        assert!(!err.chars().any(|c| c.is_control() && c != '\n'), "{err:?}");
        // Raw, the same message would have been a command.
        let raw = Diagnostic {
            source: "p.toml".into(),
            location: None,
            message: "unknown key `x\n::error title=t::pwned`".into(),
            help: None,
        };
        assert!(raw.message.lines().any(|l| l.starts_with("::error")));
        assert!(!raw.to_string().lines().any(|l| l.starts_with("::")));
    }

    #[test]
    fn the_caret_stays_under_escaped_text() {
        let d = Diagnostic {
            source: "p.toml".into(),
            location: Some(Location {
                line: 1,
                col: 3,
                text: "\t\tkey = 1".into(),
                width: 3,
            }),
            message: "m".into(),
            help: None,
        };
        let s = d.to_string();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[2], "1 | \\t\\tkey = 1");
        assert_eq!(lines[3], "  |     ^^^");
    }

    #[test]
    fn locate_counts_lines_and_chars() {
        let src = SourceRef {
            name: "p.toml",
            text: "a = 1\nbé = [\"x\"]\n",
        };
        let loc = src.locate(&(13..16));
        assert_eq!((loc.line, loc.col, loc.width), (2, 7, 3));
        assert_eq!(loc.text, "bé = [\"x\"]");
    }

    #[test]
    fn locate_never_panics_on_bad_spans() {
        let src = SourceRef {
            name: "p.toml",
            text: "é\n",
        };
        #[expect(
            clippy::reversed_empty_ranges,
            reason = "a reversed span must not panic"
        )]
        let spans = [0..0, 1..1, 1..100, 100..200, 3..1];
        for span in spans {
            let _ = src.locate(&span);
        }
    }

    #[test]
    fn line_index_agrees_with_locate_everywhere() {
        let texts = [
            "",
            "\n",
            "a = 1\nbé = [\"x\"]\n",
            "é\n\n\tx = \"ü\"\r\ny",
            "no newline at the end",
        ];
        for text in texts {
            let src = SourceRef {
                name: "p.toml",
                text,
            };
            let index = LineIndex::new(text);
            for start in 0..text.len() + 3 {
                let span = start..start + 2;
                let loc = src.locate(&span);
                assert_eq!(
                    index.line_col(&span),
                    (loc.line, loc.col),
                    "{text:?} {span:?}"
                );
            }
        }
    }

    #[test]
    fn typos_get_a_suggestion() {
        let keys = ["read", "write", "deny", "protect", "outputs"];
        assert_eq!(did_you_mean("wirte", &keys), Some("write"));
        assert_eq!(did_you_mean("Write", &keys), Some("write"));
        assert_eq!(did_you_mean("protected", &keys), Some("protect"));
        assert_eq!(did_you_mean("banana", &keys), None);
    }
}
