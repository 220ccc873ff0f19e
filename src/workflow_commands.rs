//! Workflow commands forged by the job's own output, broken before the
//! runner reads them: the supervisor copies the job's output through
//! [`Neutraliser`] (`supervisor::output`).
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
//! the job's side is escaped (`report::annotations::escape_data`,
//! [`crate::text`]).
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

/// The zero-width space [`Neutraliser`] inserts, as bytes.
const ZWSP: &[u8] = "\u{200B}".as_bytes();

/// The job's output as a byte stream, with every workflow command the
/// runner would read in it broken: a zero-width space breaks the `::` /
/// `##[` marker while the line still reads the same. Bytes pass through
/// unchanged and as soon as they arrive (a prompt or a progress bar without
/// a newline is not held back), except that a zero-width space goes
/// between the colons of `::` at the start of a line (after blanks) and
/// between `##` and `[` anywhere; only an incomplete UTF-8 character in a
/// line's leading blanks waits for its next bytes.
///
/// A line starts at the start of the stream and after every character
/// that a reader of the log could take for a line break: line feed and
/// carriage return (the runner's `ReadLine` splits at both, so
/// `ok\r::add-mask::X` is two lines to it), and, to be safe with any other
/// reader, vertical tab, form feed, NEL (U+0085) and the line and paragraph
/// separators (U+2028, U+2029). The state that decides it (at most the
/// last two bytes, and a split character's first bytes) is carried from
/// one read to the next, so a split anywhere changes nothing. Memory stays
/// bounded whatever the job prints (no line is ever buffered whole), and
/// bytes that are not UTF-8 pass untouched.
#[derive(Debug, Clone)]
pub struct Neutraliser {
    /// Only blanks so far on this line: a `::` here is a command.
    blank: bool,
    /// The last byte out was a `:` that ended a line's blanks.
    colon: bool,
    /// `#`s at the end of what went out (at most 2 counted).
    hashes: u8,
    /// The last two bytes of the input, oldest first: the start of a
    /// multi-byte line break that may end in the next read.
    last: [u8; 2],
    /// The start of a character in a line's blanks whose rest has not
    /// arrived yet (at most 3 bytes).
    carry: Vec<u8>,
}

impl Default for Neutraliser {
    fn default() -> Self {
        Neutraliser {
            blank: true,
            colon: false,
            hashes: 0,
            last: [0; 2],
            carry: Vec::new(),
        }
    }
}

impl Neutraliser {
    /// Append `input`, neutralised, to `out`.
    pub fn push(&mut self, input: &[u8], out: &mut Vec<u8>) {
        let joined;
        let data: &[u8] = if self.carry.is_empty() {
            input
        } else {
            let mut j = std::mem::take(&mut self.carry);
            j.extend_from_slice(input);
            joined = j;
            &joined
        };
        let mut i = 0;
        while i < data.len() {
            if self.blank {
                match leading_char(&data[i..]) {
                    Lead::Blank(len) => {
                        for &b in &data[i..i + len] {
                            self.note(b);
                        }
                        out.extend_from_slice(&data[i..i + len]);
                        i += len;
                        self.hashes = 0;
                        continue;
                    }
                    Lead::Incomplete => {
                        self.carry = data[i..].to_vec();
                        return;
                    }
                    Lead::Other => {
                        self.blank = false;
                        if data[i] == b':' {
                            self.note(b':');
                            out.push(b':');
                            i += 1;
                            self.colon = true;
                            self.hashes = 0;
                            continue;
                        }
                    }
                }
            }
            let b = data[i];
            if std::mem::take(&mut self.colon) && b == b':' {
                out.extend_from_slice(ZWSP);
            }
            if b == b'[' && self.hashes >= 2 {
                out.extend_from_slice(ZWSP);
            }
            out.push(b);
            self.hashes = if b == b'#' {
                (self.hashes + 1).min(2)
            } else {
                0
            };
            if self.note(b) {
                self.blank = true;
            }
            i += 1;
        }
    }

    /// Remember input byte `b`; true when it ends a line break.
    fn note(&mut self, b: u8) -> bool {
        let breaks = match b {
            b'\n' | b'\r' | 0x0b | 0x0c => true,
            // NEL (C2 85), LINE SEPARATOR (E2 80 A8), PARAGRAPH SEPARATOR
            // (E2 80 A9).
            0x85 => self.last[1] == 0xc2,
            0xa8 | 0xa9 => self.last == [0xe2, 0x80],
            _ => false,
        };
        self.last = [self.last[1], b];
        breaks
    }

    /// At the end of the stream: what was held back.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.carry);
    }
}

enum Lead {
    /// A whitespace character of this many bytes (`str::trim_start`'s).
    Blank(usize),
    /// The bytes end inside a multi-byte character.
    Incomplete,
    /// Anything else, including bytes that are not UTF-8.
    Other,
}

fn leading_char(bytes: &[u8]) -> Lead {
    let width = match bytes.first() {
        Some(b) if *b < 0x80 => 1,
        Some(b) if *b >= 0xF0 => 4,
        Some(b) if *b >= 0xE0 => 3,
        Some(b) if *b >= 0xC0 => 2,
        _ => return Lead::Other,
    };
    let Some(head) = bytes.get(..width) else {
        // A truncated sequence is only worth waiting for if what arrived
        // so far is a valid start.
        return match std::str::from_utf8(bytes) {
            Err(e) if e.error_len().is_none() => Lead::Incomplete,
            _ => Lead::Other,
        };
    };
    match std::str::from_utf8(head)
        .ok()
        .and_then(|s| s.chars().next())
    {
        Some(c) if c.is_whitespace() => Lead::Blank(width),
        _ => Lead::Other,
    }
}

/// Size of each read of the job's output.
const COPY_CHUNK: usize = 64 << 10;

/// Copy the job's output from `input` to `output` through a
/// [`Neutraliser`], flushing after every read so output appears as the job
/// writes it. Returns the number of bytes read. Stops at end of input, or
/// at the first error of either side.
pub fn copy_neutralised(
    mut input: impl std::io::Read,
    mut output: impl std::io::Write,
) -> std::io::Result<u64> {
    let mut buf = vec![0u8; COPY_CHUNK];
    let mut out = Vec::with_capacity(COPY_CHUNK + COPY_CHUNK / 2);
    let mut n = Neutraliser::default();
    let mut total = 0u64;
    loop {
        let got = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(got) => got,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        total += got as u64;
        out.clear();
        n.push(&buf[..got], &mut out);
        output.write_all(&out)?;
        output.flush()?;
    }
    out.clear();
    n.finish(&mut out);
    output.write_all(&out)?;
    output.flush()?;
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One line through the stream neutraliser, as the job's output goes.
    fn neutralise_line(line: &str) -> String {
        let mut n = Neutraliser::default();
        let mut out = Vec::new();
        n.push(line.as_bytes(), &mut out);
        n.finish(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

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

    /// Does the runner see a workflow command in this line?
    fn runner_sees_command(line: &str) -> bool {
        line.trim_start().starts_with("::") || line.contains("##[")
    }

    /// The lines as the runner reads them (`StreamReader.ReadLine`: a
    /// line ends at LF, CR or CRLF), and as a more eager reader would
    /// (any Unicode line break).
    fn runner_lines(text: &str) -> Vec<&str> {
        text.split(['\n', '\r', '\x0b', '\x0c', '\u{85}', '\u{2028}', '\u{2029}'])
            .collect()
    }

    /// Any line, split as the runner would, that it executes.
    fn any_command(text: &str) -> bool {
        runner_lines(text).into_iter().any(runner_sees_command)
    }

    #[test]
    fn a_carriage_return_starts_a_line_for_the_runner() {
        for forged in [
            "ok\r::add-mask::X",
            "50%\r::error::fake",
            "x\r\n::warning title=t::y",
            "a\x0b::add-path::/tmp",
            "a\x0c::set-env name=A::1",
            "a\u{85}::add-mask::X",
            "a\u{2028}::add-mask::X",
            "a\u{2029} ::add-mask::X",
            "a\r \u{a0}::stop-commands::t",
        ] {
            // Raw, the runner (or a reader splitting at every line break)
            // would execute it.
            assert!(any_command(forged), "{forged:?}");
            let out = neutralise_line(forged);
            assert!(!any_command(&out), "{forged:?} -> {out:?}");
            assert_eq!(
                out.replace('\u{200B}', ""),
                forged,
                "only zero-width spaces are added"
            );
        }
        // `\r::` in the middle of a line used to pass untouched.
        assert_eq!(
            neutralise_line("ok\r::add-mask::X"),
            "ok\r:\u{200B}:add-mask::X"
        );
    }

    #[test]
    fn a_line_break_split_across_reads_still_starts_a_line() {
        let input = "ok\r::add-mask::X\nb\u{2028}::error::e\nc\u{85}::warning::w\n\
                     d\r\n::notice::n\ne\u{2029}\u{2028}::debug::d";
        let bytes = input.as_bytes();
        assert!(any_command(input));
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                let out = stream(&[&bytes[..i], &bytes[i..j], &bytes[j..]]);
                let text = String::from_utf8(out).unwrap_or_default();
                assert!(!any_command(&text), "split {i},{j}: {text:?}");
                assert_eq!(text.replace('\u{200B}', ""), input, "split {i},{j}");
            }
        }
    }

    #[test]
    fn escape_sequences_in_the_output_pass_but_commands_do_not() {
        // The job's own output is its own (colours, progress bars): only
        // the runner's commands are broken, whatever precedes them.
        let input = "\x1b[31mred\x1b[0m\r::add-mask::X\n\x1b]0;title\x07";
        let out = neutralise_line(input);
        assert!(!any_command(&out), "{out:?}");
        assert!(out.starts_with("\x1b[31mred\x1b[0m\r:\u{200B}:"), "{out:?}");
    }

    fn stream(chunks: &[&[u8]]) -> Vec<u8> {
        let mut n = Neutraliser::default();
        let mut out = Vec::new();
        for c in chunks {
            n.push(c, &mut out);
        }
        n.finish(&mut out);
        out
    }

    #[test]
    fn forged_commands_split_across_reads_are_still_neutralised() {
        let input = "ok\n::set-env name=A::1\n \u{a0}\t::add-path::/x\nbar ##[set-env name=B;]2\n\
                     a::b\n##[x]\n\r::add-mask::y\n::\n:\n# ## #[ ###[\n";
        let bytes = input.as_bytes();
        let whole = stream(&[bytes]);
        // Split at every byte, in two and in three pieces: the runner never
        // sees a command, and ordinary lines come out unchanged.
        for i in 0..=bytes.len() {
            for j in i..=bytes.len() {
                let out = stream(&[&bytes[..i], &bytes[i..j], &bytes[j..]]);
                let text = String::from_utf8(out.clone()).unwrap_or_default();
                for line in runner_lines(&text) {
                    assert!(!runner_sees_command(line), "split {i},{j}: {line:?}");
                }
                assert_eq!(
                    text.replace('\u{200B}', ""),
                    input,
                    "split {i},{j}: only zero-width spaces are added"
                );
                if i == 0 {
                    assert_eq!(out, whole, "a split changes nothing");
                }
            }
        }
        let text = String::from_utf8(whole).unwrap_or_default();
        assert!(
            text.starts_with("ok\n:\u{200B}:set-env name=A::1\n"),
            "{text}"
        );
        assert!(text.contains("\na::b\n"), "{text}");
    }

    #[test]
    fn binary_output_without_commands_passes_byte_for_byte() {
        let mut x: u32 = 0x1234_5678;
        let blob: Vec<u8> = (0..200_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                match (x >> 8) as u8 {
                    b'#' | b':' => 0,
                    b => b,
                }
            })
            .collect();
        let mut out = Vec::new();
        let n = copy_neutralised(&blob[..], &mut out).unwrap_or_default();
        assert_eq!(n, blob.len() as u64);
        assert!(out == blob);
        // Chunked at odd places too, including inside multi-byte blanks.
        let pieces: Vec<&[u8]> = blob.chunks(7).collect();
        assert!(stream(&pieces) == blob);
    }

    #[test]
    fn a_line_without_end_is_streamed_not_buffered() {
        // Nothing is held back but an incomplete character in leading
        // blanks: a prompt or progress bar shows as it is written.
        let mut n = Neutraliser::default();
        let mut out = Vec::new();
        n.push(b"Password: ", &mut out);
        assert_eq!(out, b"Password: ");
        out.clear();
        n.push(&vec![b'x'; 1 << 20], &mut out);
        assert_eq!(out.len(), 1 << 20);
        let mut m = Neutraliser::default();
        out.clear();
        m.push(b"\xc2", &mut out);
        assert!(out.is_empty() && m.carry.len() == 1);
        m.push(b"\xa0::add-mask::z", &mut out);
        assert_eq!(out, "\u{a0}:\u{200B}:add-mask::z".as_bytes());
    }

    #[test]
    fn ordinary_output_is_untouched() {
        for line in ["Compiling foo v1.0", "a::b", "  error: x", "std::io::Error"] {
            assert_eq!(neutralise_line(line), line);
        }
    }
}
