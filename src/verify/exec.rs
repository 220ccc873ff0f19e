//! Run one command with a deadline and capture its output, without letting
//! a process that escaped the session (and kept the pipes open) hang us.

use std::io::{self, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What one run printed and how it ended.
#[derive(Debug, Default, Clone)]
pub struct Captured {
    /// `None` when the deadline killed it.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
}

impl Captured {
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// Both streams, for canary searches.
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Run `cmd` (stdin closed, stdout/stderr captured) for at most `limit`.
pub fn run(mut cmd: Command, limit: Duration) -> io::Result<Captured> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn()?;
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = wait_until(&mut child, Instant::now() + limit)?;
    // Readers end when every writer closed the pipe; a daemon that escaped
    // with the pipe open must not hold us up, so take what is there.
    let grace = Instant::now() + Duration::from_millis(300);
    Ok(Captured {
        status,
        stdout: out.take(grace),
        stderr: err.take(grace),
    })
}

fn wait_until(child: &mut Child, deadline: Instant) -> io::Result<Option<ExitStatus>> {
    let mut pause = Duration::from_micros(200);
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

struct Drain {
    buf: Arc<Mutex<Vec<u8>>>,
    thread: Option<JoinHandle<()>>,
}

fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> Drain {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let thread = pipe.map(|mut r| {
        let buf = buf.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = r.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                if let Ok(mut b) = buf.lock() {
                    b.extend_from_slice(&chunk[..n]);
                }
            }
        })
    });
    Drain { buf, thread }
}

impl Drain {
    fn take(mut self, until: Instant) -> String {
        if let Some(t) = self.thread.take() {
            while !t.is_finished() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(1));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        self.buf
            .lock()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }
}
