//! Process-tree facts read from /proc.

use std::fs;

/// Every descendant of `pid` (children, their children, …), found through
/// `/proc/PID/task/TID/children` of each thread.
pub fn descendants(pid: u32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut queue = vec![pid];
    while let Some(p) = queue.pop() {
        let Ok(tasks) = fs::read_dir(format!("/proc/{p}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            let path = task.path().join("children");
            let Ok(text) = fs::read_to_string(path) else {
                continue;
            };
            for child in text
                .split_ascii_whitespace()
                .filter_map(|s| s.parse::<u32>().ok())
            {
                if let Ok(c) = i32::try_from(child)
                    && !out.contains(&c)
                {
                    out.push(c);
                    queue.push(child);
                }
            }
        }
    }
    out
}

/// The direct children of process `pid` (of all its threads).
pub fn children(pid: u32) -> Vec<i32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|text| {
            text.split_ascii_whitespace()
                .filter_map(|s| s.parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The argument vector of `pid` (empty when gone or unreadable), each
/// argument cut at 4 KiB and at most 64 of them.
pub fn cmdline(pid: i32) -> Vec<String> {
    let Ok(raw) = fs::read(format!("/proc/{pid}/cmdline")) else {
        return Vec::new();
    };
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .take(64)
        .map(|a| String::from_utf8_lossy(&a[..a.len().min(4096)]).into_owned())
        .collect()
}

/// Resident memory of `pid` in bytes (0 when it is gone).
pub fn rss_bytes(pid: i32) -> u64 {
    // statm's second field is resident pages.
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/statm")) else {
        return 0;
    };
    let pages: u64 = text
        .split_ascii_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    pages.saturating_mul(page_size())
}

fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|v| u64::try_from(v).ok())
        .unwrap_or(4096)
}

/// Tasks (threads) that count against `RLIMIT_NPROC` for `uid` right now.
pub fn tasks_of_uid(uid: u32) -> u64 {
    let Ok(entries) = fs::read_dir("/proc") else {
        return 0;
    };
    let mut n = 0;
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|s| s.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        let mut real_uid = None;
        let mut threads = 1;
        for line in status.lines() {
            if let Some(rest) = line.strip_prefix("Uid:") {
                real_uid = rest
                    .split_ascii_whitespace()
                    .next()
                    .and_then(|s| s.parse::<u32>().ok());
            } else if let Some(rest) = line.strip_prefix("Threads:") {
                threads = rest.trim().parse().unwrap_or(1);
            }
        }
        if real_uid == Some(uid) {
            n += threads;
        }
    }
    n
}

/// Whether `pid` has exited, or is exiting: a zombie (`Z`, `X` in
/// `/proc/PID/stat`), or a process that has released its memory on the
/// way out (`/proc/PID/exe` answers `ENOENT`; a live process that only
/// hides its `exe` by being non-dumpable answers `EACCES` and is not
/// exiting), or gone.
pub fn is_exiting(pid: i32) -> bool {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = text
        .rfind(')')
        .and_then(|i| text[i + 1..].split_ascii_whitespace().next());
    if matches!(state, Some("Z" | "X" | "x")) {
        return true;
    }
    matches!(
        fs::read_link(format!("/proc/{pid}/exe")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound
    )
}

/// The first number of a field of `/proc/ID/status` (`Tgid:`, `PPid:` …).
pub fn status_field(id: i32, field: &str) -> Option<u32> {
    let text = fs::read_to_string(format!("/proc/{id}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field))?
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

/// CPU time of `pid` and of its reaped children, in milliseconds:
/// (user, system), from /proc/PID/stat (utime, stime, cutime, cstime).
pub fn cpu_ms(pid: i32) -> (u64, u64) {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return (0, 0);
    };
    // The command name is in parentheses and may contain spaces: the
    // fields that follow start after the last ')'.
    let Some(rest) = text.rfind(')').map(|i| &text[i + 1..]) else {
        return (0, 0);
    };
    let fields: Vec<u64> = rest
        .split_ascii_whitespace()
        .skip(11)
        .take(4)
        .map(|f| f.parse().unwrap_or(0))
        .collect();
    let [utime, stime, cutime, cstime] = fields[..] else {
        return (0, 0);
    };
    let tick_ms = 1000 / clock_ticks().max(1);
    ((utime + cutime) * tick_ms, (stime + cstime) * tick_ms)
}

fn clock_ticks() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|v| u64::try_from(v).ok())
        .unwrap_or(100)
}

/// CPU time of every child this process has waited for (and theirs), in
/// milliseconds: (user, system).
pub fn reaped_children_cpu_ms() -> (u64, u64) {
    use nix::sys::resource::{UsageWho, getrusage};
    match getrusage(UsageWho::RUSAGE_CHILDREN) {
        Ok(u) => {
            let ms = |tv: nix::sys::time::TimeVal| {
                u64::try_from(tv.tv_sec()).unwrap_or(0) * 1000
                    + u64::try_from(tv.tv_usec()).unwrap_or(0) / 1000
            };
            (ms(u.user_time()), ms(u.system_time()))
        }
        Err(_) => (0, 0),
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    /// A child that has exited but is not reaped yet (what the init finds
    /// for a moment after the job ends) is exiting; a running one is not.
    #[test]
    fn a_zombie_is_exiting_and_a_running_process_is_not() {
        let mut running = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut done = std::process::Command::new("true").spawn().unwrap();
        let zombie = i32::try_from(done.id()).unwrap();
        // Bounded (30 s): `true` exits at once; only a broken run waits.
        let mut exited = false;
        for _ in 0..3000 {
            exited = fs::read_to_string(format!("/proc/{zombie}/stat")).is_ok_and(|s| {
                s.rsplit(')')
                    .next()
                    .is_some_and(|r| r.trim_start().starts_with('Z'))
            });
            if exited {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(exited, "the child never became a zombie");
        assert!(is_exiting(zombie));
        assert!(!is_exiting(i32::try_from(running.id()).unwrap()));
        running.kill().unwrap();
        running.wait().unwrap();
        done.wait().unwrap();
    }
}
