//! `vetto`: parse the command line, run, map the outcome to an exit status.

use std::process::ExitCode;

fn main() -> ExitCode {
    // The hidden probe performs one action for tests and `vetto verify`.
    if let Some(code) = vetto::probe::entry() {
        return code;
    }
    if let Some(code) = vetto::verify::probe_entry() {
        return code;
    }
    // The hidden stage entry must run before anything starts a thread: it
    // restricts this very process and then execs the job.
    if let Some(code) = vetto::sandbox::stage_entry() {
        return code;
    }
    // So must the helper that makes a network namespace for UDP sockets.
    if let Some(code) = vetto::sandbox::dead_net::entry() {
        return code;
    }
    vetto::cli::main()
}
