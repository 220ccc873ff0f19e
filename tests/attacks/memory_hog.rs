//! Memory exhaustion under `--max-memory`: processes touching memory as
//! fast as they can. The evidence is what they report themselves: each
//! prints how many bytes it has touched after every 4 MiB chunk (flushed),
//! so the last line of each is a lower bound of what it held.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::util::{Feature, Tier, World};
use crate::{at_every_tier, require};

const MIB: u64 = 1 << 20;
const LIMIT: u64 = 256 * MIB;

/// Touches 4 MiB chunks until `CAP` bytes or until malloc fails; prints
/// `ID touched N` after each chunk, `ID enomem N` on failure. Then it
/// keeps what it holds until all `N` of its group are there (a file
/// `held.ID` each), so that what they report was held at the same time.
const TOUCHER: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
int main(int argc, char **argv) {
    size_t chunk = 4u << 20, cap = strtoull(argv[1], 0, 10), touched = 0;
    const char *id = argv[2];
    int group = atoi(argv[3]);
    const char *how = "done";
    while (touched < cap) {
        char *p = malloc(chunk);
        if (!p) { how = "enomem"; break; }
        memset(p, 1, chunk);
        touched += chunk;
        printf("%s touched %zu\n", id, touched);
        fflush(stdout);
    }
    printf("%s %s %zu\n", id, how, touched);
    fflush(stdout);
    char name[64];
    snprintf(name, sizeof name, "held.%s", id);
    int fd = open(name, O_CREAT | O_WRONLY, 0644);
    if (fd >= 0) close(fd);
    for (;;) {
        int there = 0;
        for (int i = 0; i < group; i++) {
            snprintf(name, sizeof name, "held.p%d", i);
            there += access(name, F_OK) == 0;
        }
        if (there >= group) return 0;
        usleep(10000);
    }
}
"#;

/// The toucher, built by the test as the test user: `P/touch`.
fn build_toucher(w: &World) -> String {
    w.write(&w.project.join("touch.c"), TOUCHER);
    w.bare(&["cc", "-O1", "-o", "touch", "touch.c"])
        .run()
        .assert_success();
    w.project.join("touch").to_str().unwrap().to_owned()
}

/// The most each process reported having touched, by id.
fn touched(stdout: &str) -> BTreeMap<String, u64> {
    let mut most = BTreeMap::new();
    for line in stdout.lines() {
        let mut f = line.split_whitespace();
        if let (Some(id), Some(_), Some(n)) = (f.next(), f.next(), f.next())
            && let Ok(n) = n.parse::<u64>()
        {
            let e = most.entry(id.to_owned()).or_insert(0);
            *e = (*e).max(n);
        }
    }
    most
}

/// A shell line starting four touchers at once (after removing the marks
/// of an earlier group).
fn four_in_parallel(touch: &str, cap: u64) -> String {
    "rm -f held.*; ".to_owned()
        + &(0..4)
            .map(|i| format!("{touch} {cap} p{i} 4 & "))
            .collect::<String>()
        + "wait"
}

/// Runs as an unprivileged user: one process touching memory as fast as it
/// can. Evidence: bare, it touches twice the limit; under
/// `--max-memory 256MiB` it has touched at most the limit plus 16 MiB when
/// it stops (ENOMEM from malloc, or the tree killed), and vetto named the
/// mechanism at the start.
fn one_process_hogging_memory_stops_at_the_limit(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let touch = build_toucher(&w);
    let cap = (2 * LIMIT).to_string();
    let bare = w.bare(&[&touch, &cap, "p0", "1"]).run();
    bare.assert_success();
    assert_eq!(
        touched(&bare.stdout()).get("p0"),
        Some(&(2 * LIMIT)),
        "{}",
        bare.dump()
    );

    let out = w
        .sandboxed_with(
            &["--max-memory", "256MiB"],
            &[
                "sh",
                "-c",
                &format!("rm -f held.*; exec {touch} {cap} p0 1"),
            ],
        )
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_ran()
        .assert_stderr_contains("vetto: memory 256 MiB: RLIMIT_DATA per process");
    let most = touched(&out.stdout()).get("p0").copied().unwrap_or(0);
    assert!(most > 0, "the process never ran\n{}", out.dump());
    assert!(
        most <= LIMIT + 16 * MIB,
        "touched {} MiB under a 256 MiB limit\n{}",
        most / MIB,
        out.dump()
    );
    out.assert_stdout_lacks("p0 done");
}
at_every_tier!(one_process_hogging_memory_stops_at_the_limit);

/// Runs as an unprivileged user: four such processes started at once by a
/// shell. Evidence: bare, together they touch 2× the limit; under
/// `--max-memory 256MiB` the sum of what they report stays within
/// 1.25 × the limit — whatever the scheduling, since each inherits only
/// half of its parent's unused share when it is forked.
fn four_processes_hogging_memory_stop_within_the_limit_together(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    let touch = build_toucher(&w);
    let bare = w
        .bare(&["sh", "-c", &four_in_parallel(&touch, LIMIT / 2)])
        .run();
    bare.assert_success();
    let sum: u64 = touched(&bare.stdout()).values().sum();
    assert!(
        sum > LIMIT * 5 / 4,
        "bare, they touched only {sum}\n{}",
        bare.dump()
    );

    let out = w
        .sandboxed_with(
            &["--max-memory", "256MiB"],
            &["sh", "-c", &four_in_parallel(&touch, 2 * LIMIT)],
        )
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_ran();
    let each = touched(&out.stdout());
    let sum: u64 = each.values().sum();
    assert!(sum > 0, "nothing ran\n{}", out.dump());
    assert!(
        sum <= LIMIT * 5 / 4,
        "together they touched {} MiB under a 256 MiB limit: {each:?}\n{}",
        sum / MIB,
        out.dump()
    );
}
at_every_tier!(four_processes_hogging_memory_stop_within_the_limit_together);

/// Runs as an unprivileged user: node, python3 and a Java program start
/// and finish under `--max-memory 512MiB` (their `PROT_NONE` reservations
/// are not counted by `RLIMIT_DATA`).
fn runtimes_start_under_a_512mib_limit(tier: Tier) {
    require!(tier.feature());
    let w = World::at(tier);
    w.write(
        &w.project.join("Hello.java"),
        "public class Hello { public static void main(String[] a) { \
         byte[] b = new byte[32 << 20]; System.out.println(\"java ok \" + b.length); } }\n",
    );
    w.bare(&["javac", "Hello.java"]).run().assert_success();
    let project = w.project.to_str().unwrap();
    for (argv, expect) in [
        (
            vec![
                "node",
                "-e",
                "console.log('node ok', Buffer.alloc(32 << 20).length)",
            ],
            "node ok",
        ),
        (
            vec![
                "python3",
                "-c",
                "print('python ok', len(bytearray(32 << 20)))",
            ],
            "python ok",
        ),
        (vec!["java", "-cp", project, "Hello"], "java ok"),
    ] {
        w.sandboxed_with(&["--max-memory", "512MiB"], &argv)
            .timeout(Duration::from_secs(60))
            .run()
            .assert_success()
            .assert_stdout_contains(expect);
    }
}
at_every_tier!(runtimes_start_under_a_512mib_limit);

/// Runs as an unprivileged user, only where vetto's cgroup v2 is delegated
/// with the memory controller (it is not on a cgroup-v1 host: SKIP): the
/// kernel holds the whole tree at `memory.max`. Evidence: four processes
/// together stay within 1.25 × the limit, and vetto says the cgroup holds it.
fn job_cgroup_holds_four_memory_hogs(tier: Tier) {
    require!(tier.feature());
    require!(Feature::CgroupV2Memory);
    let w = World::at(tier);
    let touch = build_toucher(&w);
    let out = w
        .sandboxed_with(
            &["--max-memory", "256MiB"],
            &["sh", "-c", &four_in_parallel(&touch, 2 * LIMIT)],
        )
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_ran()
        .assert_stderr_contains("cgroup v2 memory.max");
    let sum: u64 = touched(&out.stdout()).values().sum();
    assert!(
        sum <= LIMIT * 5 / 4,
        "together {} MiB\n{}",
        sum / MIB,
        out.dump()
    );
}
at_every_tier!(job_cgroup_holds_four_memory_hogs);
