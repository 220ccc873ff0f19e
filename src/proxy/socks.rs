//! SOCKS5 (RFC 1928) with username/password authentication (RFC 1929):
//! user `vetto`, password the session credential. Only `CONNECT`; a domain
//! name (`socks5h://`) is decided and resolved by vetto like any name, a
//! bare address only by an IP rule.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::events::{ConnDecision, ConnReason};

use super::Shared;
use super::http::constant_time_eq;
use super::relay::{tunnel, tunnel_named};
use super::route::{Record, Target, decide, decide_addr, dial, read_refusal, read_some};

/// RFC 1928 reply codes.
const SUCCEEDED: u8 = 0;
const GENERAL_FAILURE: u8 = 1;
const NOT_ALLOWED: u8 = 2;
const HOST_UNREACHABLE: u8 = 4;
const COMMAND_NOT_SUPPORTED: u8 = 7;
const ADDRESS_NOT_SUPPORTED: u8 = 8;

/// The largest handshake: greeting (2+255), auth (3+255+255), request (7+255).
const MAX_HANDSHAKE: usize = 1100;

/// Bytes of the handshake read so far, consumed from the front.
struct Input {
    buf: Vec<u8>,
    pos: usize,
}

impl Input {
    /// The next `n` bytes, reading more from `client` as needed.
    async fn take(
        &mut self,
        shared: &Shared,
        client: &mut TcpStream,
        n: usize,
    ) -> Result<Vec<u8>, (ConnReason, String)> {
        while self.buf.len() - self.pos < n {
            match read_some(shared, client, &mut self.buf, MAX_HANDSHAKE).await {
                Ok(0) => {
                    return Err((
                        ConnReason::Malformed,
                        "connection ended inside the SOCKS handshake".into(),
                    ));
                }
                Ok(_) => {}
                Err(e) => return Err(read_refusal(&e)),
            }
        }
        let out = self.buf[self.pos..self.pos + n].to_vec();
        self.pos += n;
        Ok(out)
    }

    async fn byte(
        &mut self,
        shared: &Shared,
        client: &mut TcpStream,
    ) -> Result<u8, (ConnReason, String)> {
        Ok(self.take(shared, client, 1).await?[0])
    }
}

/// A SOCKS4 reply: version 0, code 91 (request rejected or failed).
pub(crate) const SOCKS4_REJECTED: [u8; 8] = [0, 91, 0, 0, 0, 0, 0, 0];

fn reply(code: u8) -> [u8; 10] {
    [5, code, 0, 1, 0, 0, 0, 0, 0, 0]
}

/// The destination of a SOCKS request.
enum Dest {
    Name(String),
    Addr(IpAddr),
}

pub(crate) async fn serve(
    shared: &Shared,
    mut client: TcpStream,
    first: Vec<u8>,
    rec: &mut Record,
) {
    let mut input = Input { buf: first, pos: 0 };
    match handshake(shared, &mut client, &mut input, rec).await {
        Ok(Some((dest, port))) => {
            let target = match dest {
                Dest::Name(n) => decide(shared, rec, &n, port).await,
                Dest::Addr(ip) => decide_addr(shared, rec, ip, port).map(|()| Target::Addr(ip)),
            };
            let refused = |rec: &Record| match rec_outcome(rec) {
                Some(ConnDecision::Failed) => HOST_UNREACHABLE,
                _ => NOT_ALLOWED,
            };
            let early = input.buf[input.pos..].to_vec();
            match target {
                Err(()) => {
                    let _ = client.write_all(&reply(refused(rec))).await;
                }
                // A bare address is dialled before the reply, so a failure
                // is a reply the client can show.
                Ok(Target::Addr(ip)) => {
                    let Ok(server) = dial(shared, rec, SocketAddr::new(ip, port)).await else {
                        let _ = client.write_all(&reply(refused(rec))).await;
                        return;
                    };
                    if client.write_all(&reply(SUCCEEDED)).await.is_ok() {
                        tunnel(shared, rec, client, server, None, early).await;
                    }
                }
                // A name is dialled only once the job's first bytes agree.
                Ok(Target::Name(route)) => {
                    if client.write_all(&reply(SUCCEEDED)).await.is_ok() {
                        tunnel_named(shared, rec, client, route, early).await;
                    }
                }
            }
        }
        Ok(None) => {}
        Err((reason, detail)) => {
            rec.refuse(shared, reason, detail);
        }
    }
}

fn rec_outcome(rec: &Record) -> Option<ConnDecision> {
    rec.decision()
}

/// Greeting, authentication and request. `Ok(None)` when the handshake
/// ended with a refusal already recorded and answered.
async fn handshake(
    shared: &Shared,
    client: &mut TcpStream,
    input: &mut Input,
    rec: &mut Record,
) -> Result<Option<(Dest, u16)>, (ConnReason, String)> {
    let malformed = |what: &str| (ConnReason::Malformed, format!("SOCKS: {what}"));
    // Greeting: VER NMETHODS METHODS.
    if input.byte(shared, client).await? != 5 {
        return Err(malformed("not version 5"));
    }
    let n = usize::from(input.byte(shared, client).await?);
    let methods = input.take(shared, client, n).await?;
    if !methods.contains(&2) {
        // No acceptable method: the client offered no username/password.
        let _ = client.write_all(&[5, 0xff]).await;
        rec.refuse(
            shared,
            ConnReason::NoCredential,
            "SOCKS client offered no username/password".into(),
        );
        return Ok(None);
    }
    client
        .write_all(&[5, 2])
        .await
        .map_err(|e| malformed(&e.to_string()))?;
    // RFC 1929: VER ULEN UNAME PLEN PASSWD.
    if input.byte(shared, client).await? != 1 {
        return Err(malformed("bad authentication version"));
    }
    let ulen = usize::from(input.byte(shared, client).await?);
    let user = input.take(shared, client, ulen).await?;
    let plen = usize::from(input.byte(shared, client).await?);
    let pass = input.take(shared, client, plen).await?;
    let ok =
        constant_time_eq(&user, b"vetto") & constant_time_eq(&pass, shared.credential.as_bytes());
    if !ok {
        let _ = client.write_all(&[1, 1]).await;
        rec.refuse(shared, ConnReason::NoCredential, String::new());
        return Ok(None);
    }
    client
        .write_all(&[1, 0])
        .await
        .map_err(|e| malformed(&e.to_string()))?;
    // Request: VER CMD RSV ATYP DST.ADDR DST.PORT.
    let head = input.take(shared, client, 4).await?;
    if head[0] != 5 {
        return Err(malformed("bad request version"));
    }
    let dest = match head[3] {
        1 => {
            let b = input.take(shared, client, 4).await?;
            Dest::Addr(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])))
        }
        4 => {
            let b = input.take(shared, client, 16).await?;
            let mut o = [0u8; 16];
            o.copy_from_slice(&b);
            Dest::Addr(IpAddr::V6(Ipv6Addr::from(o)))
        }
        3 => {
            let len = usize::from(input.byte(shared, client).await?);
            let b = input.take(shared, client, len).await?;
            match String::from_utf8(b) {
                Ok(s) => Dest::Name(s),
                Err(_) => {
                    let _ = client.write_all(&reply(GENERAL_FAILURE)).await;
                    return Err(malformed("domain name is not UTF-8"));
                }
            }
        }
        _ => {
            let _ = client.write_all(&reply(ADDRESS_NOT_SUPPORTED)).await;
            return Err(malformed("unknown address type"));
        }
    };
    let p = input.take(shared, client, 2).await?;
    let port = u16::from_be_bytes([p[0], p[1]]);
    if head[1] != 1 {
        let _ = client.write_all(&reply(COMMAND_NOT_SUPPORTED)).await;
        return Err(malformed(
            "only CONNECT is supported (no BIND, no UDP ASSOCIATE)",
        ));
    }
    if port == 0 {
        let _ = client.write_all(&reply(GENERAL_FAILURE)).await;
        return Err(malformed("port 0"));
    }
    Ok(Some((dest, port)))
}
