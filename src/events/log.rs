//! `session.jsonl`: one JSON object a line, each with `schema` and `type`.
//!
//! The writer flushes every line as it happens (one `write(2)` a line, no
//! user-space buffer), so a session killed mid-way leaves a readable log;
//! the reader tolerates a torn last line. Producers never touch the file:
//! they [`EventSink::emit`] into a channel and one writer thread owns the
//! file and the [`Aggregator`].

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::{Aggregator, Event, SCHEMA_VERSION, SessionEnd, SessionStart, Violation};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    #[error("cannot create the session log {path}")]
    Create { path: PathBuf, source: io::Error },
    #[error("cannot create the session log {path}")]
    Place {
        path: PathBuf,
        source: crate::sys::safe_fs::SafeFsError,
    },
    #[error("cannot write the session log {path}")]
    Write { path: PathBuf, source: io::Error },
    #[error("cannot read the session log {path}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path} is not a vetto session log (no session-start line)")]
    NoStart { path: PathBuf },
    #[error("the session log writer thread panicked")]
    WriterPanicked,
}

#[derive(Serialize)]
struct LineOut<'a> {
    schema: u32,
    #[serde(flatten)]
    event: &'a Event,
}

#[derive(Deserialize)]
struct LineIn {
    schema: u32,
    #[serde(flatten)]
    event: Event,
}

/// Serialise one event as its log line (with the trailing newline).
pub fn to_line(event: &Event) -> Result<String, serde_json::Error> {
    let mut s = serde_json::to_string(&LineOut {
        schema: SCHEMA_VERSION,
        event,
    })?;
    s.push('\n');
    Ok(s)
}

/// Appends events to `session.jsonl`, one unbuffered write per line.
#[derive(Debug)]
pub struct LogWriter {
    file: File,
    path: PathBuf,
    redactions: Redactions,
    pub bytes: u64,
    pub lines: u64,
}

impl LogWriter {
    /// A new, empty log at `path` that has replaced whatever was there
    /// (a link planted there is replaced, never followed: see
    /// [`crate::sys::safe_fs`]); `path`'s directory is taken as named.
    pub fn create(path: &Path) -> Result<Self, LogError> {
        use crate::sys::safe_fs::{Dir, Parents, SafeFsError};
        let place = |source| LogError::Place {
            path: path.to_path_buf(),
            source,
        };
        let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| {
            place(SafeFsError::BadName {
                dir: path.to_path_buf(),
                name: String::new(),
            })
        })?;
        let parent = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let file = Dir::open(parent, Parents::Followed)
            .and_then(|dir| dir.replace_with_new(name, LOG_MODE))
            .map_err(place)?;
        Ok(LogWriter::from_file(file, path.to_path_buf()))
    }

    /// A log written to `file`, already created safely at `path`.
    pub fn from_file(file: File, path: PathBuf) -> Self {
        LogWriter {
            file,
            path,
            redactions: Redactions::default(),
            bytes: 0,
            lines: 0,
        }
    }

    pub fn write(&mut self, event: &Event) -> Result<(), LogError> {
        let line = to_line(event).map_err(|e| LogError::Write {
            path: self.path.clone(),
            source: e.into(),
        })?;
        let line = self.redactions.apply(line);
        self.file
            .write_all(line.as_bytes())
            .map_err(|source| LogError::Write {
                path: self.path.clone(),
                source,
            })?;
        self.bytes += line.len() as u64;
        self.lines += 1;
        Ok(())
    }
}

/// Where producers send events. Never blocks and never fails: a broken
/// log must not disturb the job.
pub trait EventSink: Send {
    fn emit(&self, event: Event);
}

/// The sending half handed to the supervisor, the notify handler and the
/// proxy (clone it freely).
#[derive(Debug, Clone)]
pub struct ChannelSink(mpsc::Sender<Event>, Redactions);

impl EventSink for ChannelSink {
    fn emit(&self, event: Event) {
        // The writer only goes away after every sender is dropped, or after
        // it panicked; then there is nobody to tell.
        let _ = self.0.send(event);
    }
}

impl ChannelSink {
    /// From now on, `secret` is written as [`REDACTED`] wherever it
    /// appears in a line of this log.
    pub fn redact(&self, secret: &str) {
        self.1.add(secret);
    }
}

/// What a redacted secret is written as.
pub const REDACTED: &str = "[redacted]";

/// The session's own secrets, which the job can still put in what the log
/// records — the proxy's credential is in its `HTTP_PROXY`, and a job that
/// runs `curl -x "$HTTP_PROXY"` has it in its argv, which every violation
/// and connection names. Each line is written with every one of them
/// replaced, so no record, and no report rendered from the log, holds one.
#[derive(Debug, Clone, Default)]
pub struct Redactions(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Redactions {
    /// Short strings would redact ordinary words: secrets only.
    const MIN_LEN: usize = 16;

    pub fn add(&self, secret: &str) {
        if secret.len() >= Self::MIN_LEN
            && let Ok(mut list) = self.0.lock()
            && !list.iter().any(|s| s == secret)
        {
            list.push(secret.to_string());
        }
    }

    /// `line` with every secret replaced. A secret's bytes are ASCII
    /// letters, digits and `+/=` (hex and base64), which JSON writes as
    /// they are: the serialised line holds them verbatim.
    pub fn apply(&self, line: String) -> String {
        let Ok(list) = self.0.lock() else {
            return line;
        };
        let mut line = line;
        for secret in list.iter() {
            if line.contains(secret.as_str()) {
                line = line.replace(secret.as_str(), REDACTED);
            }
        }
        line
    }
}

/// Collects events in memory (tests, `verify`).
#[derive(Debug, Default)]
pub struct VecSink(pub std::sync::Mutex<Vec<Event>>);

impl EventSink for VecSink {
    fn emit(&self, event: Event) {
        if let Ok(mut v) = self.0.lock() {
            v.push(event);
        }
    }
}

/// How often the writer logs the repeat counts of aggregated violations.
pub const REPEAT_FLUSH: Duration = Duration::from_secs(1);

/// What the writer thread did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriterStats {
    pub lines: u64,
    pub bytes: u64,
    /// Violations received, repeats included.
    pub violations_seen: u64,
}

/// The writer thread; [`SessionWriter::finish`] after dropping every sink.
#[derive(Debug)]
pub struct SessionWriter {
    handle: JoinHandle<Result<WriterStats, LogError>>,
}

/// The mode of a session log in a report directory (an artifact).
pub const LOG_MODE: u32 = 0o644;

/// Create the log file ([`LogWriter::create`]) and start the writer thread.
pub fn spawn_writer(path: &Path) -> Result<(ChannelSink, SessionWriter), LogError> {
    spawn_writer_to(LogWriter::create(path)?)
}

/// Start the writer thread on a log the caller created.
pub fn spawn_writer_to(mut writer: LogWriter) -> Result<(ChannelSink, SessionWriter), LogError> {
    let path = writer.path.clone();
    let redactions = writer.redactions.clone();
    let (tx, rx) = mpsc::channel::<Event>();
    let handle = std::thread::Builder::new()
        .name("vetto-log".into())
        .spawn(move || write_loop(&mut writer, &rx))
        .map_err(|source| LogError::Create { path, source })?;
    Ok((ChannelSink(tx, redactions), SessionWriter { handle }))
}

impl SessionWriter {
    /// Wait until every sink is dropped and the last line is written.
    pub fn finish(self) -> Result<WriterStats, LogError> {
        self.handle.join().map_err(|_| LogError::WriterPanicked)?
    }
}

/// Feed `events` through an aggregator into `writer` (the writer thread's
/// body; also used directly by tests and the benchmark).
pub fn write_loop(
    writer: &mut LogWriter,
    rx: &mpsc::Receiver<Event>,
) -> Result<WriterStats, LogError> {
    let mut agg = Aggregator::default();
    let mut stats = WriterStats::default();
    // Keep going after a write error so the job never notices; report the
    // first error at the end.
    let mut first_error: Option<LogError> = None;
    let mut last_flush = Instant::now();
    let put = |w: &mut LogWriter, e: &Event, first_error: &mut Option<LogError>| {
        if first_error.is_none()
            && let Err(err) = w.write(e)
        {
            *first_error = Some(err);
        }
    };
    loop {
        let event = match rx.recv_timeout(REPEAT_FLUSH) {
            Ok(e) => Some(e),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match event {
            Some(Event::SessionStart(start)) => {
                agg = Aggregator::new(start.roots());
                put(writer, &Event::SessionStart(start), &mut first_error);
            }
            Some(Event::Violation(v)) => {
                stats.violations_seen += 1;
                if let Some(v) = agg.observe(*v) {
                    put(writer, &Event::Violation(Box::new(v)), &mut first_error);
                }
            }
            Some(Event::SessionEnd(mut end)) => {
                for r in agg.flush() {
                    put(writer, &Event::Repeated(r), &mut first_error);
                }
                end.violations_by_rule = agg.counts_by_rule();
                end.dropped_distinct = agg.dropped_distinct;
                put(writer, &Event::SessionEnd(end), &mut first_error);
            }
            Some(other) => put(writer, &other, &mut first_error),
            None => {}
        }
        if last_flush.elapsed() >= REPEAT_FLUSH {
            for r in agg.flush() {
                put(writer, &Event::Repeated(r), &mut first_error);
            }
            last_flush = Instant::now();
        }
    }
    for r in agg.flush() {
        put(writer, &Event::Repeated(r), &mut first_error);
    }
    stats.lines = writer.lines;
    stats.bytes = writer.bytes;
    match first_error {
        Some(e) => Err(e),
        None => Ok(stats),
    }
}

/// A line the reader could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    pub line: usize,
    pub reason: String,
}

/// A parsed `session.jsonl`.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SessionLog {
    pub events: Vec<Event>,
    /// The last line was cut off (the session was killed while writing).
    pub torn_tail: bool,
    /// Other lines that did not parse (unknown event types of a newer vetto).
    pub skipped: Vec<SkippedLine>,
    /// The highest `schema` seen, when newer than this vetto understands.
    pub newer_schema: Option<u32>,
}

impl SessionLog {
    pub fn read(path: &Path) -> Result<Self, LogError> {
        let text = std::fs::read(path).map_err(|source| LogError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let log = SessionLog::parse(&String::from_utf8_lossy(&text));
        if log.start().is_none() {
            return Err(LogError::NoStart {
                path: path.to_path_buf(),
            });
        }
        Ok(log)
    }

    pub fn parse(text: &str) -> Self {
        let mut log = SessionLog::default();
        let complete = text.ends_with('\n');
        let lines: Vec<&str> = text.lines().collect();
        let n = lines.len();
        for (i, line) in lines.into_iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<LineIn>(line) {
                Ok(l) => {
                    if l.schema > SCHEMA_VERSION {
                        log.newer_schema = log.newer_schema.max(Some(l.schema));
                    }
                    log.events.push(l.event);
                }
                Err(_) if i + 1 == n && !complete => log.torn_tail = true,
                Err(e) => log.skipped.push(SkippedLine {
                    line: i + 1,
                    reason: e.to_string(),
                }),
            }
        }
        log
    }

    pub fn start(&self) -> Option<&SessionStart> {
        self.events.iter().find_map(|e| match e {
            Event::SessionStart(s) => Some(&**s),
            _ => None,
        })
    }

    pub fn end(&self) -> Option<&SessionEnd> {
        self.events.iter().rev().find_map(|e| match e {
            Event::SessionEnd(s) => Some(&**s),
            _ => None,
        })
    }

    pub fn violations(&self) -> impl Iterator<Item = &Violation> {
        self.events.iter().filter_map(|e| match e {
            Event::Violation(v) => Some(&**v),
            _ => None,
        })
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::events::{ResourceSample, Timestamp};

    fn sample(t: u64) -> Event {
        Event::Resource(ResourceSample {
            t,
            procs: 1,
            ..Default::default()
        })
    }

    #[test]
    fn every_line_carries_the_schema_version() {
        let line = to_line(&sample(5)).unwrap();
        assert!(
            line.starts_with("{\"schema\":1,\"type\":\"resource\""),
            "{line}"
        );
        assert!(line.ends_with('\n'));
    }

    #[test]
    fn a_session_killed_mid_write_leaves_a_readable_log() {
        let mut text = to_line(&sample(1)).unwrap();
        text.push_str(&to_line(&sample(2)).unwrap());
        let full = to_line(&sample(3)).unwrap();
        text.push_str(&full[..full.len() / 2]);
        let log = SessionLog::parse(&text);
        assert_eq!(log.events.len(), 2);
        assert!(log.torn_tail);
        assert!(log.skipped.is_empty());
    }

    #[test]
    fn unknown_event_types_are_skipped_not_fatal() {
        let mut text = String::from("{\"schema\":2,\"type\":\"from-the-future\"}\n");
        text.push_str(&to_line(&sample(1)).unwrap());
        let log = SessionLog::parse(&text);
        assert_eq!(log.events.len(), 1);
        assert_eq!(log.skipped.len(), 1);
        assert!(!log.torn_tail);
        assert_eq!(log.newer_schema, None);
    }

    #[test]
    fn writer_thread_writes_lines_as_they_come() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let (sink, writer) = spawn_writer(&path).unwrap();
        sink.emit(sample(1));
        // Written before the session ends: poll until the line is on disk.
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::fs::read_to_string(&path).unwrap().is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(
            SessionLog::parse(&std::fs::read_to_string(&path).unwrap())
                .events
                .len(),
            1
        );
        sink.emit(sample(2));
        drop(sink);
        let stats = writer.finish().unwrap();
        assert_eq!(stats.lines, 2);
        let _ = Timestamp::now();
    }

    #[test]
    fn the_writer_aggregates_a_storm_and_fills_in_the_end_counts() {
        use crate::report::fixture;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let (sink, writer) = spawn_writer(&path).unwrap();
        // Replay the un-aggregated attack violations 500 times over.
        sink.emit(Event::SessionStart(Box::new(fixture::start())));
        let violations = fixture::attack_violations();
        for _ in 0..500 {
            for v in &violations {
                sink.emit(Event::Violation(Box::new(v.clone())));
            }
        }
        let end = fixture::attack_session().into_iter().last().unwrap();
        let Event::SessionEnd(mut end) = end else {
            unreachable!()
        };
        end.violations_by_rule.clear();
        sink.emit(Event::SessionEnd(end));
        drop(sink);
        let stats = writer.finish().unwrap();
        assert_eq!(stats.violations_seen, 500 * violations.len() as u64);
        let log = SessionLog::read(&path).unwrap();
        assert_eq!(
            log.violations().count(),
            11,
            "one line per distinct violation"
        );
        assert!(stats.lines < 40, "{} lines", stats.lines);
        let total: u64 = log.end().unwrap().violations_by_rule.values().sum();
        assert_eq!(total, 500 * violations.len() as u64);
        let model = crate::report::Model::build(&log).unwrap();
        assert_eq!(model.total_violations, total);
    }

    #[test]
    fn producers_on_many_threads_share_one_log() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("session.jsonl");
        let (sink, writer) = spawn_writer(&path).unwrap();
        let handles: Vec<_> = (0..4u64)
            .map(|k| {
                let sink = sink.clone();
                std::thread::spawn(move || {
                    for t in 0..250 {
                        sink.emit(sample(k * 1000 + t));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        drop(sink);
        assert_eq!(writer.finish().unwrap().lines, 1000);
        let log = SessionLog::parse(&std::fs::read_to_string(&path).unwrap());
        assert_eq!(log.events.len(), 1000);
        assert!(
            log.skipped.is_empty() && !log.torn_tail,
            "no interleaved lines"
        );
    }

    #[test]
    fn a_file_that_is_not_a_session_log_is_refused_clearly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.jsonl");
        std::fs::write(&path, to_line(&sample(1)).unwrap()).unwrap();
        let err = SessionLog::read(&path).unwrap_err();
        assert!(err.to_string().contains("not a vetto session log"), "{err}");
    }

    #[test]
    fn unwritable_log_dir_is_a_clear_error() {
        let err = spawn_writer(Path::new("/nonexistent-dir/x/session.jsonl")).unwrap_err();
        assert!(err.to_string().contains("cannot create the session log"));
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod schema_tests {
    use crate::report::fixture;

    /// The wire format, pinned: a change to any event's shape is a reviewed
    /// diff (and, if an old reader would misread it, a SCHEMA_VERSION bump).
    #[test]
    fn session_log_wire_format() {
        insta::assert_snapshot!(fixture::to_jsonl(&fixture::attack_session()));
    }

    /// docs/session-log.schema.json describes what the writer writes.
    #[test]
    fn documented_schema_matches_every_line_written() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/session-log.schema.json")).unwrap();
        let validator = jsonschema::validator_for(&schema).unwrap();
        // The egress session adds what the attack one lacks: a
        // connection's `requests` (a secret's host).
        let text = fixture::to_jsonl(&fixture::attack_session())
            + &fixture::to_jsonl(&fixture::egress_session());
        assert!(text.contains("\"requests\":["));
        let mut types = std::collections::BTreeSet::new();
        for line in text.lines() {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{line}\n{errors:#?}");
            types.insert(v["type"].as_str().unwrap().to_string());
        }
        assert_eq!(
            types.len(),
            8,
            "the fixture covers every event type: {types:?}"
        );
        // The schema is not vacuous.
        let bad = serde_json::json!({"schema": 1, "type": "violation", "rule": "made-up"});
        assert!(!validator.is_valid(&bad));
    }
}
