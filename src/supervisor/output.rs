//! `vetto ci`: the job's stdout and stderr pass through vetto on their way
//! to the runner, which would otherwise execute the workflow commands a
//! sandboxed step prints (`::set-env`, `::add-path`, `::add-mask`,
//! `::stop-commands`, the legacy `##[…]`). Two threads copy them through
//! [`workflow_commands::copy_neutralised`]: binary-safe, bounded memory, flushed
//! after every read so the output keeps its pace.

use std::io;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::sandbox::JobOutput;
use crate::workflow_commands;

/// How long [`OutputCopier::finish`] waits for the job's output to end
/// once the session is over. Every process of the sandbox is dead by then,
/// so the pipes are closed; this only bounds a descriptor that got out.
pub const FINISH_GRACE: Duration = Duration::from_secs(5);

/// The two copying threads.
#[derive(Debug)]
pub struct OutputCopier {
    threads: Vec<(&'static str, JoinHandle<io::Result<u64>>)>,
    done: mpsc::Receiver<()>,
}

impl OutputCopier {
    /// Start copying the job's stdout to ours and its stderr to ours. Call
    /// after [`prepare`](super::prepare): the threads inherit its signal
    /// mask, so a forwarded signal never lands on them.
    pub fn start(output: JobOutput) -> io::Result<Self> {
        let (tx, done) = mpsc::channel();
        let mut threads = Vec::new();
        let JobOutput { stdout, stderr } = output;
        let out_tx = tx.clone();
        threads.push((
            "stdout",
            std::thread::Builder::new()
                .name("vetto-stdout".into())
                .spawn(move || {
                    // A failed write (vetto's stdout closed) ends the copy
                    // and closes the pipe: the job then sees EPIPE, as it
                    // would have without vetto in between.
                    let r = workflow_commands::copy_neutralised(stdout, io::stdout());
                    let _ = out_tx.send(());
                    r
                })?,
        ));
        threads.push((
            "stderr",
            std::thread::Builder::new()
                .name("vetto-stderr".into())
                .spawn(move || {
                    let r = workflow_commands::copy_neutralised(stderr, io::stderr());
                    let _ = tx.send(());
                    r
                })?,
        ));
        Ok(OutputCopier { threads, done })
    }

    /// Wait until the job's output has been copied to the end (at most
    /// `grace`). Returns false, leaving the threads to finish on their own,
    /// if a write end is still open after that.
    pub fn finish(self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        let mut ended = 0;
        while ended < self.threads.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.done.recv_timeout(left) {
                Ok(()) => ended += 1,
                Err(_) => return false,
            }
        }
        for (name, t) in self.threads {
            match t.join() {
                Ok(Ok(_)) => {}
                // Our own stdout or stderr went away: nothing to tell it on.
                Ok(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe => {}
                Ok(Err(e)) => eprintln!("vetto: error: copying the command's {name}: {e}"),
                Err(_) => eprintln!("vetto: error: copying the command's {name} failed"),
            }
        }
        true
    }
}
