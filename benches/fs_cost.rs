//! What one file-system call costs, per layer of the FULL tier (issue 12,
//! item 5: where `git add` goes). The loops below run the calls a `git add`
//! makes most — `getppid` (no path: the seccomp filter alone), `stat`,
//! `open`+`close` of a project file and of a system file, create+unlink and
//! `mkdir`+`rmdir` in the project — and print nanoseconds per call.
//! `benches/fs_cost.sh` runs them bare, under bubblewrap, under a Landlock
//! domain alone (this binary's `landlock` mode: the rights vetto handles,
//! read and execute on `/`, everything on the project, around the loops or
//! `git add`) and under vetto,
//! rounds interleaved, and prints the medians side by side (figures in
//! docs/benchmarks.md).
//!
//! ```text
//! fs_cost loops DIR                  # the loops, in DIR
//! fs_cost landlock DIR -- CMD ARG…   # CMD under Landlock alone
//! fs_cost landlock-tree DIR -- CMD …  # the same, reads and writes unhandled
//! ```

#[cfg(target_os = "linux")]
mod linux {
    use std::fs::OpenOptions;
    use std::path::{Path, PathBuf};
    use std::time::Instant;

    const CALLS: u32 = 100_000;

    /// A readable system file every Linux host has.
    fn system_file() -> &'static Path {
        ["/usr/lib/os-release", "/etc/os-release", "/etc/passwd"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.is_file())
            .unwrap_or(Path::new("/etc/passwd"))
    }

    /// Nanoseconds per iteration of `f`, run `n` times.
    fn per_call(n: u32, mut f: impl FnMut() -> std::io::Result<()>) -> std::io::Result<f64> {
        let begin = Instant::now();
        for _ in 0..n {
            f()?;
        }
        Ok(begin.elapsed().as_nanos() as f64 / f64::from(n))
    }

    /// One measured call, by name.
    type Call<'a> = Box<dyn FnMut() -> std::io::Result<()> + 'a>;

    fn loops(dir: &Path) -> std::io::Result<()> {
        let file = dir.join("fs-cost-file");
        std::fs::write(&file, b"x")?;
        let system = system_file();
        let created = dir.join("fs-cost-new");
        let made = dir.join("fs-cost-dir");
        let rows: [(&str, u32, Call<'_>); 6] = [
            (
                "getppid",
                CALLS,
                Box::new(|| {
                    let _ = nix::unistd::getppid();
                    Ok(())
                }),
            ),
            (
                "stat (project)",
                CALLS,
                Box::new(|| std::fs::symlink_metadata(&file).map(drop)),
            ),
            (
                "open+close (project)",
                CALLS,
                Box::new(|| std::fs::File::open(&file).map(drop)),
            ),
            (
                "open+close (system file)",
                CALLS,
                Box::new(|| std::fs::File::open(system).map(drop)),
            ),
            (
                "create+unlink (project)",
                CALLS / 4,
                Box::new(|| {
                    OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&created)
                        .map(drop)?;
                    std::fs::remove_file(&created)
                }),
            ),
            (
                "mkdir+rmdir (project)",
                CALLS / 4,
                Box::new(|| {
                    std::fs::create_dir(&made)?;
                    std::fs::remove_dir(&made)
                }),
            ),
        ];
        for (name, n, mut f) in rows {
            // One round first, unmeasured: caches and the dentries warm.
            per_call(n / 10, &mut f)?;
            println!("{name}\t{:.0}", per_call(n, &mut f)?);
        }
        std::fs::remove_file(&file)
    }

    /// Which file rights the domain handles.
    #[derive(Clone, Copy)]
    enum Handled {
        /// Every file right, which ABI 5 completes: vetto's FULL tier.
        All,
        /// Only what a mount view cannot refuse — creations, removals,
        /// `REFER`, execution, device `ioctl`s — leaving reads, writes,
        /// `TRUNCATE` and directory listing to the mounts. What FULL would
        /// cost if it let the view alone decide them (issue 12).
        Tree,
    }

    /// Restrict this process as vetto's FULL tier does at most (the
    /// `handled` rights; read and execute beneath `/`, everything beneath
    /// `dir`, the harmless devices), with nothing else around it, then run
    /// `command`.
    fn landlock_then(dir: &Path, handled: Handled, command: &[String]) -> Result<(), String> {
        use landlock::{
            ABI, Access, AccessFs, Ruleset, RulesetAttr, RulesetCreatedAttr, path_beneath_rules,
        };
        let abi = ABI::V5;
        let handled = match handled {
            Handled::All => AccessFs::from_all(abi),
            Handled::Tree => {
                AccessFs::from_all(abi)
                    & !(AccessFs::ReadFile
                        | AccessFs::WriteFile
                        | AccessFs::Truncate
                        | AccessFs::ReadDir)
            }
        };
        // A rule may grant only handled rights.
        let ruleset = Ruleset::default()
            .handle_access(handled)
            .and_then(|r| r.create())
            .and_then(|r| {
                r.add_rules(path_beneath_rules(
                    [Path::new("/")],
                    (AccessFs::from_read(abi) | AccessFs::Execute) & handled,
                ))
            })
            .and_then(|r| r.add_rules(path_beneath_rules([dir], handled)))
            // As vetto grants them: git opens /dev/null for writing.
            .and_then(|r| {
                r.add_rules(path_beneath_rules(
                    ["/dev/null", "/dev/zero", "/dev/urandom"].map(Path::new),
                    AccessFs::from_file(abi) & handled,
                ))
            })
            .and_then(|r| r.restrict_self())
            .map_err(|e| format!("landlock: {e}"))?;
        if ruleset.ruleset != landlock::RulesetStatus::FullyEnforced {
            return Err(format!("landlock: only {:?} here", ruleset.ruleset));
        }
        let Some((program, args)) = command.split_first() else {
            return Err("landlock: no command after `--`".into());
        };
        use std::os::unix::process::CommandExt;
        let e = std::process::Command::new(program).args(args).exec();
        Err(format!("{program}: {e}"))
    }

    pub fn main() {
        let args: Vec<String> = std::env::args().collect();
        // `cargo bench` passes `--bench`: with no mode, say how to run it.
        let (Some(mode), Some(dir)) = (args.get(1), args.get(2)) else {
            eprintln!(
                "fs_cost: run benches/fs_cost.sh (or `fs_cost loops DIR | fs_cost landlock[-tree] DIR -- CMD`)"
            );
            return;
        };
        let dir = PathBuf::from(dir);
        let result = match mode.as_str() {
            "loops" => loops(&dir).map_err(|e| e.to_string()),
            "landlock" | "landlock-tree" => {
                let handled = if mode == "landlock" {
                    Handled::All
                } else {
                    Handled::Tree
                };
                match args.get(3).map(String::as_str) {
                    Some("--") => landlock_then(&dir, handled, args.get(4..).unwrap_or_default()),
                    _ => Err(format!("{mode}: DIR -- CMD ARG…")),
                }
            }
            other => Err(format!("unknown mode {other:?}")),
        };
        if let Err(e) = result {
            eprintln!("fs_cost in {}: {e}", dir.display());
            std::process::exit(1);
        }
    }
}

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    eprintln!("fs_cost: Landlock and the FULL tier are Linux only");
}
