//! The egress proxy's cost (issue 10, "Done when"): a 1 GiB transfer over
//! direct loopback against the same transfer through the proxy (CONNECT to a
//! pinned name), and the latency of short connections both ways, side by
//! side in one run. Rounds alternate direct and proxied so a loaded machine
//! hurts both alike. Run: `cargo bench --bench proxy_throughput` (release;
//! figures in docs/benchmarks.md). `BENCH_GIB`, `BENCH_ROUNDS` and `BENCH_CONNS`
//! change the sizes.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use vetto::events::Event;
use vetto::events::log::EventSink;
use vetto::policy::{HostPattern, Origin, PinnedHost};
use vetto::proxy::{Config, Proxy};

const CHUNK: usize = 256 * 1024;

/// Counts events instead of writing a log (the log writer is measured by
/// the report_render bench).
#[derive(Default)]
struct CountingSink(AtomicU64);

impl EventSink for CountingSink {
    fn emit(&self, _: Event) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A server that, per connection, either drains `total` bytes and answers
/// one byte (throughput), or echoes one byte (latency).
fn server() -> SocketAddr {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap_or_else(|e| fail("bind", e));
    let addr = l.local_addr().unwrap_or_else(|e| fail("local_addr", e));
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            std::thread::spawn(move || serve(s));
        }
    });
    addr
}

fn serve(mut s: TcpStream) {
    let _ = s.set_nodelay(true);
    let mut kind = [0u8; 9];
    if s.read_exact(&mut kind).is_err() {
        return;
    }
    let total = u64::from_be_bytes([
        kind[1], kind[2], kind[3], kind[4], kind[5], kind[6], kind[7], kind[8],
    ]);
    if kind[0] == b'T' {
        let mut buf = vec![0u8; CHUNK];
        let mut got = 0u64;
        while got < total {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => got += n as u64,
            }
        }
    }
    let _ = s.write_all(b"k");
}

fn fail(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("proxy_throughput: {what}: {e}");
    std::process::exit(1)
}

/// Open a connection to the server, directly or through the proxy.
fn open(server: SocketAddr, proxy: Option<(SocketAddr, &str)>) -> TcpStream {
    let Some((proxy, token)) = proxy else {
        let s = TcpStream::connect(server).unwrap_or_else(|e| fail("connect", e));
        let _ = s.set_nodelay(true);
        return s;
    };
    let mut s = TcpStream::connect(proxy).unwrap_or_else(|e| fail("connect proxy", e));
    let _ = s.set_nodelay(true);
    let req = format!(
        "CONNECT bench.test:{0} HTTP/1.1\r\nHost: bench.test:{0}\r\nProxy-Authorization: {token}\r\n\r\n",
        server.port()
    );
    s.write_all(req.as_bytes())
        .unwrap_or_else(|e| fail("CONNECT", e));
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => fail("CONNECT", "no response"),
        }
    }
    if !head.starts_with(b"HTTP/1.1 200") {
        fail("CONNECT", String::from_utf8_lossy(&head));
    }
    s
}

/// CPU time (user + system) of the whole process so far: the client, the
/// server and the proxy's threads all run in it.
fn cpu() -> Duration {
    vetto::sandbox::os::process_cpu_time().unwrap_or(Duration::ZERO)
}

/// Send `total` bytes and wait for the server's acknowledgement: wall time
/// and CPU time.
fn transfer(
    server: SocketAddr,
    proxy: Option<(SocketAddr, &str)>,
    total: u64,
) -> (Duration, Duration) {
    let cpu0 = cpu();
    let begin = Instant::now();
    let mut s = open(server, proxy);
    let mut kind = vec![b'T'];
    kind.extend(total.to_be_bytes());
    s.write_all(&kind).unwrap_or_else(|e| fail("write", e));
    let buf = vec![0x5au8; CHUNK];
    let mut sent = 0u64;
    while sent < total {
        let n = (total - sent).min(CHUNK as u64) as usize;
        s.write_all(&buf[..n]).unwrap_or_else(|e| fail("write", e));
        sent += n as u64;
    }
    let mut ack = [0u8; 1];
    s.read_exact(&mut ack).unwrap_or_else(|e| fail("ack", e));
    (begin.elapsed(), cpu().saturating_sub(cpu0))
}

/// One short connection: connect (and CONNECT), one byte there and back.
fn ping(server: SocketAddr, proxy: Option<(SocketAddr, &str)>) -> Duration {
    let begin = Instant::now();
    let mut s = open(server, proxy);
    s.write_all(&[b'P', 0, 0, 0, 0, 0, 0, 0, 0])
        .unwrap_or_else(|e| fail("write", e));
    let mut ack = [0u8; 1];
    s.read_exact(&mut ack).unwrap_or_else(|e| fail("ack", e));
    begin.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn origin() -> Origin {
    Origin {
        source: "bench".into(),
        line: 0,
        col: 0,
        written: String::new(),
    }
}

fn main() {
    let gib = env_num("BENCH_GIB", 1);
    let conns = env_num("BENCH_CONNS", 2000) as usize;
    let rounds = env_num("BENCH_ROUNDS", 5) as usize;
    let total = gib << 30;
    let server = server();
    let config = Config {
        allow: vec![HostPattern {
            host: "bench.test".into(),
            port: Some(server.port()),
            origin: origin(),
        }],
        pins: vec![PinnedHost {
            host: "bench.test".into(),
            addr: Ipv4Addr::LOCALHOST.into(),
            origin: origin(),
        }],
        ..Config::default()
    };
    let sink = Arc::new(CountingSink::default());
    let proxy = Proxy::start(config, sink.clone()).unwrap_or_else(|e| fail("start", e));
    let paddr = proxy.listen_host().unwrap_or_else(|e| fail("listen", e));
    let token = proxy.proxy_authorization();
    let via = Some((paddr, token.as_str()));

    // Warm up both paths.
    transfer(server, None, 64 << 20);
    transfer(server, via, 64 << 20);

    let mut direct = Vec::new();
    let mut proxied = Vec::new();
    for _ in 0..rounds {
        direct.push(transfer(server, None, total));
        proxied.push(transfer(server, via, total));
    }
    let (d, p) = (
        median(direct.iter().map(|x| x.0).collect()),
        median(proxied.iter().map(|x| x.0).collect()),
    );
    let (dc, pc) = (
        median(direct.iter().map(|x| x.1).collect()),
        median(proxied.iter().map(|x| x.1).collect()),
    );
    let rate = |t: Duration| total as f64 / t.as_secs_f64() / (1u64 << 20) as f64;

    let mut lat_direct = Vec::with_capacity(conns);
    let mut lat_proxy = Vec::with_capacity(conns);
    for _ in 0..conns {
        lat_direct.push(ping(server, None));
        lat_proxy.push(ping(server, via));
    }
    let (ld, lp) = (median(lat_direct), median(lat_proxy));
    let stats = proxy.shutdown();

    println!(
        "proxy_throughput: {gib} GiB x {rounds} rounds, {conns} short connections, alternating direct/proxied"
    );
    println!();
    println!("| measure | direct loopback | through the proxy | proxy / direct |");
    println!("|---|---|---|---|");
    println!(
        "| {gib} GiB transfer, median of {rounds} | {:.0} MiB/s ({:.2} s) | {:.0} MiB/s ({:.2} s) | {:.1}% |",
        rate(d),
        d.as_secs_f64(),
        rate(p),
        p.as_secs_f64(),
        100.0 * rate(p) / rate(d)
    );
    println!(
        "| CPU time of the transfer (client + server + proxy), median | {:.2} s | {:.2} s | ×{:.2} |",
        dc.as_secs_f64(),
        pc.as_secs_f64(),
        pc.as_secs_f64() / dc.as_secs_f64().max(1e-9)
    );
    println!(
        "| connection + 1-byte round trip, median of {conns} | {:.3} ms | {:.3} ms | +{:.3} ms |",
        ld.as_secs_f64() * 1e3,
        lp.as_secs_f64() * 1e3,
        (lp.as_secs_f64() - ld.as_secs_f64()) * 1e3
    );
    println!();
    println!(
        "rounds (s): direct {:?}, proxied {:?}",
        direct
            .iter()
            .map(|t| (t.0.as_secs_f64() * 100.0).round() / 100.0)
            .collect::<Vec<_>>(),
        proxied
            .iter()
            .map(|t| (t.0.as_secs_f64() * 100.0).round() / 100.0)
            .collect::<Vec<_>>()
    );
    println!(
        "proxy recorded {} connections, {} events, {} bytes",
        stats.connections,
        sink.0.load(Ordering::Relaxed),
        stats.bytes()
    );
}
