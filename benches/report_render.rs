//! The violation-storm benchmark (issue 4, item 7): a job causes 100,000
//! denied writes of which 10,000 are distinct.
//!
//! Measures (1) what the supervisor pays to record them: every violation
//! goes through the real `EventSink` channel into the log thread and its
//! aggregator; (2) the log's size; (3) the time to read the log and render
//! SARIF + HTML, and their sizes. Run: `cargo bench --bench report_render`
//! (numbers in docs/benchmarks.md).

use std::io::Write;
use std::time::Instant;

use vetto::events::log::{EventSink, SessionLog, spawn_writer};
use vetto::events::{
    Action, Event, ProcessInfo, Provenance, RuleId, SessionEnd, Target, Timestamp, Violation,
};
use vetto::exit::Outcome;
use vetto::report::{Model, fixture, html, sarif};

const TOTAL: u64 = 100_000;
const DISTINCT: u64 = 10_000;

fn main() {
    let dir = std::env::temp_dir().join(format!("vetto-bench-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let log_path = dir.join("session.jsonl");

    // 1. Record: emit 100k violations through the sink, as the supervisor would.
    let start = fixture::start();
    let t0 = start.started_at;
    let (sink, writer) = match spawn_writer(&log_path) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("cannot create {}: {e}", log_path.display());
            std::process::exit(1);
        }
    };
    let begin = Instant::now();
    sink.emit(Event::SessionStart(Box::new(start)));
    for n in 0..TOTAL {
        let k = n % DISTINCT;
        sink.emit(Event::Violation(Box::new(Violation {
            rule: RuleId::FsWriteDenied,
            time: Timestamp(t0.0 + n / 10),
            action: Action::Blocked,
            process: ProcessInfo {
                pid: 1000 + (n % 50) as u32,
                exe: "/usr/bin/touch".into(),
                argv: vec!["touch".into(), format!("file{k}.txt")],
                cwd: fixture::PROJECT.into(),
                parent_chain: vec![(999, "/bin/sh".into())],
            },
            target: Target::Path {
                path: format!("{}/.cache/storm/dir{}/file{k}.txt", fixture::HOME, k % 100).into(),
            },
            attribution: None,
            policy_rule: None,
            detail: String::new(),
            provenance: Provenance::SeccompNotify,
        })));
    }
    let emitted = begin.elapsed();
    sink.emit(Event::SessionEnd(Box::new(SessionEnd {
        ended_at: Timestamp(t0.0 + TOTAL / 10),
        outcome: Outcome::Exited(0),
        exit_code: 0,
        duration_ms: TOTAL / 10,
        cpu_user_ms: 0,
        cpu_sys_ms: 0,
        peak_rss_bytes: 0,
        peak_procs: 1,
        proxy_bytes: 0,
        violations_by_rule: Default::default(),
        dropped_distinct: 0,
    })));
    drop(sink);
    let stats = match writer.finish() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("log writer failed: {e}");
            std::process::exit(1);
        }
    };
    let recorded = begin.elapsed();

    // 2. Render.
    let begin = Instant::now();
    let log = match SessionLog::read(&log_path) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    let read = begin.elapsed();
    let Some(model) = Model::build(&log) else {
        eprintln!("no session start");
        std::process::exit(1);
    };
    let built = begin.elapsed();
    let sarif = sarif::render(&model, &sarif::SarifOptions::default()).unwrap_or_default();
    let sarif_done = begin.elapsed();
    let page = html::render(&model).unwrap_or_default();
    let total = begin.elapsed();

    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let _ = gz.write_all(&sarif);
    let sarif_gz = gz.finish().map(|v| v.len()).unwrap_or(0);

    let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
    println!("violations emitted        {TOTAL} ({DISTINCT} distinct)");
    println!(
        "emit (supervisor side)    {:.1} ms total, {:.2} µs per violation",
        ms(emitted),
        ms(emitted) * 1000.0 / TOTAL as f64
    );
    println!("recorded (log flushed)    {:.1} ms", ms(recorded));
    println!(
        "log                       {} lines, {} bytes",
        stats.lines, stats.bytes
    );
    println!("read log                  {:.1} ms", ms(read));
    println!("fold into model           {:.1} ms", ms(built - read));
    println!(
        "SARIF                     {:.1} ms, {} bytes ({} gzipped), {} results",
        ms(sarif_done - built),
        sarif.len(),
        sarif_gz,
        model.findings.len().min(sarif::MAX_RESULTS)
    );
    println!(
        "HTML                      {:.1} ms, {} bytes",
        ms(total - sarif_done),
        page.len()
    );
    println!("read + SARIF + HTML       {:.1} ms", ms(total));
    let _ = std::fs::remove_dir_all(&dir);
}
