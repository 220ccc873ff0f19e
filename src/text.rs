//! Text from the sandboxed side, made safe to print on a terminal or in a
//! CI log line.
//!
//! A path, a file name or an argv[0] is chosen by the job. Printed raw, a
//! line feed or carriage return in it starts a new line of the CI log — and
//! the runner executes a line that starts with `::` as a workflow command
//! (`::add-mask::`, `::warning title=…::`) — and an escape sequence (ESC,
//! or the one-byte C1 CSI U+009B) rewrites the terminal: the title, the
//! screen, the clipboard (OSC 52). [`escape`] shows every such character as
//! a visible escape instead, so the line stays one line and a reviewer sees
//! what was there:
//!
//! | character | shown as |
//! |---|---|
//! | line feed, carriage return, tab | `\n`, `\r`, `\t` |
//! | other C0 controls, DEL | `\x1b`, `\x7f` |
//! | C1 controls (U+0080–U+009F) | `\u{9b}` |
//! | line and paragraph separators (U+2028, U+2029) | `\u{2028}` |
//! | bidirectional controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069) | `\u{202e}` |
//! | invisible U+200B, U+2060, U+FEFF | `\u{200b}` |
//! | a backslash | `\\` (so that an escape is never ambiguous) |
//! | a byte that is not UTF-8 ([`escape_bytes`], [`escape_path`]) | `\xff` |
//!
//! Bidirectional controls reorder what the reader sees ("Trojan Source"),
//! so that a name can look like another. A byte that is not UTF-8 is always
//! ≥ 0x80, a control character shown as `\x..` always < 0x80: the two never
//! read alike. Everything else passes unchanged, so ordinary names read as
//! they are.
//!
//! The escaped text is for people; the session log keeps the real value.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::Path;

/// Does `c` have to be shown escaped?
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\\' | '\u{2028}'
                | '\u{2029}'
                | '\u{061C}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200B}'
                | '\u{2060}'
                | '\u{FEFF}'
        )
}

/// `s` with every character that could start a line, move the cursor or
/// drive the terminal shown as a visible escape (see the module docs).
/// Borrowed when nothing needed escaping.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(needs_escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    push_escaped(&mut out, s);
    Cow::Owned(out)
}

/// [`escape`] for bytes that need not be UTF-8 (a file name, `/proc`
/// text): a byte that is not part of a UTF-8 character shows as `\xNN`.
pub fn escape_bytes(bytes: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(bytes) {
        return escape(s);
    }
    let mut out = String::with_capacity(bytes.len() + 8);
    for chunk in bytes.utf8_chunks() {
        push_escaped(&mut out, chunk.valid());
        for b in chunk.invalid() {
            let _ = write!(out, "\\x{b:02x}");
        }
    }
    Cow::Owned(out)
}

/// [`escape_bytes`] of a path's bytes.
pub fn escape_path(path: &Path) -> Cow<'_, str> {
    escape_bytes(path.as_os_str().as_encoded_bytes())
}

/// [`escape`] for a text of several lines that vetto composed itself (a
/// diagnostic with its source excerpt): its line feeds stay, everything
/// else is escaped — including a carriage return, which the runner reads
/// as a line break too.
pub fn escape_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && needs_escape(c)) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        push_escaped(&mut out, line);
    }
    Cow::Owned(out)
}

/// At most `max` characters of `s`, with `…` in place of the rest. Cut
/// escaped text with it: the cut may fall inside an escape, never inside
/// a character.
pub fn clip(s: &str, max: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max.saturating_sub(1)) {
        Some((at, _)) if s[at..].chars().nth(1).is_some() => Cow::Owned(format!("{}…", &s[..at])),
        _ => Cow::Borrowed(s),
    }
}

/// The longest name [`name`] and [`path_name`] show (an argv[0] may be
/// 128 KiB, a path 4 KiB).
pub const NAME_CHARS: usize = 160;

/// A name the job chose (an argv[0], a file name) for one of vetto's own
/// lines: [`escape`]d and [`clip`]ped to [`NAME_CHARS`].
pub fn name(s: &str) -> String {
    clip(&escape(s), NAME_CHARS).into_owned()
}

/// [`name`] for a path, bytes that are not UTF-8 included.
pub fn path_name(path: &Path) -> String {
    clip(&escape_path(path), NAME_CHARS).into_owned()
}

fn push_escaped(out: &mut String, s: &str) {
    for c in s.chars() {
        if !needs_escape(c) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\\' => out.push_str("\\\\"),
            c if c.is_ascii() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Would a terminal or the runner act on something in `s`?
    fn dangerous(s: &str) -> bool {
        s.chars()
            .any(|c| c.is_control() || ('\u{2028}'..='\u{2029}').contains(&c))
    }

    #[test]
    fn a_newline_in_a_file_name_cannot_forge_a_workflow_command() {
        let name = "x\n::warning title=pwned::owned";
        assert!(
            name.lines().any(|l| l.starts_with("::warning")),
            "raw, the runner reads a command"
        );
        let shown = escape(name);
        assert_eq!(shown, "x\\n::warning title=pwned::owned");
        assert_eq!(shown.lines().count(), 1);
    }

    #[test]
    fn a_carriage_return_cannot_start_a_line_either() {
        assert_eq!(escape("ok\r::error::x"), "ok\\r::error::x");
        assert_eq!(escape("ok\r\n::add-mask::X"), "ok\\r\\n::add-mask::X");
    }

    #[test]
    fn terminal_escape_sequences_are_shown_not_sent() {
        // OSC 0 (window title), CSI by ESC [ and by the C1 byte, OSC 52.
        let osc = "\x1b]0;pwned\x07";
        assert_eq!(escape(osc), "\\x1b]0;pwned\\x07");
        assert_eq!(escape("\u{9b}2J"), "\\u{9b}2J");
        assert_eq!(escape("\u{9d}52;c;aGk=\u{9c}"), "\\u{9d}52;c;aGk=\\u{9c}");
        assert_eq!(escape("a\x7fb\0c\tz"), "a\\x7fb\\x00c\\tz");
        for s in [osc, "\u{9b}2J", "a\x7f\0\u{85}b\u{2028}"] {
            assert!(dangerous(s) && !dangerous(&escape(s)), "{s:?}");
        }
    }

    #[test]
    fn bidirectional_overrides_cannot_disguise_a_name() {
        // Reads as "evil.txt" in a terminal that honours bidi.
        let name = "\u{202e}txt.live";
        assert_eq!(escape(name), "\\u{202e}txt.live");
        assert_eq!(
            escape("a\u{2066}b\u{2069}\u{200b}\u{feff}"),
            "a\\u{2066}b\\u{2069}\\u{200b}\\u{feff}"
        );
    }

    #[test]
    fn ordinary_text_is_untouched_and_borrowed() {
        for s in [
            "src/main.rs",
            "~/.ssh/id_rsa",
            "naïve café 日本語 🦀",
            "a b",
            "",
            "std::io",
        ] {
            assert!(matches!(escape(s), Cow::Borrowed(_)), "{s}");
        }
    }

    #[test]
    fn escapes_are_never_ambiguous() {
        // A literal backslash sequence and the character it names differ.
        assert_ne!(escape("\\x1b"), escape("\x1b"));
        assert_eq!(escape("\\x1b"), "\\\\x1b");
        // An invalid byte 0x9b and the character U+009B differ too.
        assert_eq!(escape_bytes(b"\x9b"), "\\x9b");
        assert_eq!(escape_bytes("\u{9b}".as_bytes()), "\\u{9b}");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_shown_as_hex() {
        assert_eq!(escape_bytes(b"a\xffb\xc3"), "a\\xffb\\xc3");
        assert_eq!(escape_bytes(b"\xe2\x80\n"), "\\xe2\\x80\\n");
        assert_eq!(escape_bytes("é".as_bytes()), "é");
        let p = std::path::Path::new("/dev/shm/\x1b]0;x\x07");
        assert_eq!(escape_path(p), "/dev/shm/\\x1b]0;x\\x07");
    }

    #[test]
    fn several_lines_keep_their_line_feeds_only() {
        assert_eq!(escape_lines("a\nb\r::x\n\x1bc"), "a\nb\\r::x\n\\x1bc");
        assert!(matches!(escape_lines("a\nb"), Cow::Borrowed(_)));
    }

    #[test]
    fn clip_cuts_at_a_character() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abcd", 4), "abcd");
        assert_eq!(clip("日本語です", 3), "日本…");
        assert_eq!(clip("", 3), "");
    }
}
