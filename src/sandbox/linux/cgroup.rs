//! `--max-memory` held by a cgroup v2 (`plan::memory::TreeBound::Cgroup`):
//! a leaf for the job beneath vetto's own delegated cgroup. The decision
//! that this host allows it is `host::probe`'s and `plan::memory`'s; this
//! only performs it, and undoes it.
//!
//! ```text
//! <vetto's cgroup>/               cgroup.subtree_control: +memory
//! ├── vetto-supervisor/           vetto itself, when it had to move ("no internal processes")
//! └── vetto-job-<pid>/            memory.max, memory.swap.max = 0, memory.oom.group = 1; the stage
//! ```

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::plan::memory::CgroupPlan;

/// The job's cgroup; removed when dropped (once its processes are gone).
#[derive(Debug)]
pub struct JobCgroup {
    dir: PathBuf,
}

/// One write of `value` to the control file `dir/name`.
fn write_control(dir: &Path, name: &str, value: &str) -> io::Result<()> {
    let path = dir.join(name);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn make_dir(dir: &Path) -> io::Result<()> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
    }
}

impl JobCgroup {
    /// Create the job's cgroup with `limit` bytes and move process `pid`
    /// (the stage, before it starts the job) into it.
    pub fn enter(plan: &CgroupPlan, limit: u64, pid: i32) -> io::Result<JobCgroup> {
        if plan.move_supervisor {
            let me = plan.parent.join("vetto-supervisor");
            make_dir(&me)?;
            write_control(&me, "cgroup.procs", &std::process::id().to_string())?;
            write_control(&plan.parent, "cgroup.subtree_control", "+memory")?;
        }
        let dir = plan
            .parent
            .join(format!("vetto-job-{}", std::process::id()));
        make_dir(&dir)?;
        let job = JobCgroup { dir };
        // Limits first, then the process: it never runs unlimited there.
        write_control(&job.dir, "memory.max", &limit.to_string())?;
        match write_control(&job.dir, "memory.swap.max", "0") {
            // No swap accounting on this kernel: nothing to swap to either.
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            other => other?,
        }
        write_control(&job.dir, "memory.oom.group", "1")?;
        write_control(&job.dir, "cgroup.procs", &pid.to_string())?;
        Ok(job)
    }

    /// Whether the kernel killed the group for memory (`oom_group_kill`).
    pub fn oom_killed(&self) -> bool {
        std::fs::read_to_string(self.dir.join("memory.events"))
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("oom_group_kill "))
                    .and_then(|n| n.trim().parse::<u64>().ok())
            })
            .is_some_and(|n| n > 0)
    }
}

impl Drop for JobCgroup {
    fn drop(&mut self) {
        // Everything is dead by now; a process takes a moment to leave.
        let _ = write_control(&self.dir, "cgroup.kill", "1");
        for _ in 0..100 {
            match std::fs::remove_dir(&self.dir) {
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(2));
                }
                _ => return,
            }
        }
    }
}
