//! Hidden `vetto __verify-probe ACTION [ARGS]`: the few actions `verify`
//! needs that are not single-syscall attempts of `vetto __probe`.
//!
//! ```text
//! loopback NONCE          serve on 127.0.0.1 (ephemeral port) and talk to it;
//!                         prints `loopback-echo NONCE` when the round trip worked
//! read-memory PID ADDR LEN  process_vm_readv of another process's memory; prints
//!                         what it read (NULs as newlines), so a secret there is
//!                         evidence in the output
//! ```
//!
//! Exit status: 0 when the action worked, 1 when it failed, 2 on bad usage.

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

/// The argv[1] that selects these actions.
pub const COMMAND: &str = crate::hidden::Hidden::VerifyProbe.arg();

/// Printed first by every action, so `verify` can tell that the job ran.
pub const MARKER: &str = "vetto-verify-probe:";

/// If argv[1] is `__verify-probe`, run the action and return its status.
pub fn entry() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next()? != COMMAND {
        return None;
    }
    let rest: Vec<OsString> = args.collect();
    Some(main(&rest))
}

fn main(args: &[OsString]) -> ExitCode {
    let args: Vec<&str> = args.iter().filter_map(|a| a.to_str()).collect();
    match args.as_slice() {
        ["loopback", nonce] => {
            println!("{MARKER} loopback");
            match loopback(nonce) {
                Ok(line) => {
                    println!("{line}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("loopback: {e}");
                    ExitCode::from(1)
                }
            }
        }
        ["read-memory", pid, addr, len] => {
            println!("{MARKER} read-memory");
            let (Ok(pid), Ok(addr), Ok(len)) = (pid.parse(), addr.parse(), len.parse()) else {
                eprintln!("read-memory: PID ADDR LEN must be numbers");
                return ExitCode::from(2);
            };
            match crate::sandbox::verify_host::read_remote(pid, addr, len) {
                Ok(bytes) => {
                    let text: Vec<u8> = bytes
                        .into_iter()
                        .map(|b| if b == 0 { b'\n' } else { b })
                        .collect();
                    println!("{}", String::from_utf8_lossy(&text));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("read-memory: process_vm_readv: {e}");
                    ExitCode::from(1)
                }
            }
        }
        _ => {
            eprintln!("usage: vetto {COMMAND} loopback NONCE | read-memory PID ADDR LEN");
            ExitCode::from(2)
        }
    }
}

/// A server and a client on 127.0.0.1: the line comes back through the
/// loopback interface.
fn loopback(nonce: &str) -> io::Result<String> {
    // An address, not text: text would link the resolver into vetto,
    // which a static build cannot carry.
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let addr = listener.local_addr()?;
    let server = std::thread::spawn(move || -> io::Result<()> {
        let (s, _) = listener.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        let mut line = String::new();
        BufReader::new(&s).read_line(&mut line)?;
        (&s).write_all(line.as_bytes())
    });
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    c.set_read_timeout(Some(Duration::from_secs(5)))?;
    c.write_all(format!("loopback-echo {nonce}\n").as_bytes())?;
    let mut reply = String::new();
    BufReader::new(&c).read_line(&mut reply)?;
    server
        .join()
        .map_err(|_| io::Error::other("the server thread panicked"))??;
    Ok(reply.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_round_trip_works_unsandboxed() {
        match loopback("n0nce") {
            Ok(line) => assert_eq!(line, "loopback-echo n0nce"),
            // A build host without any network stack: nothing to test.
            Err(e) => eprintln!("SKIP loopback_round_trip_works_unsandboxed: {e}"),
        }
    }
}
