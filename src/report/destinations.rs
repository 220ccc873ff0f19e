//! The network destinations of a session: every [`Connection`] the egress
//! layer decided, folded by (host, port, decision) with counts, bytes and
//! who made them. Bounded: at most [`MAX_DESTINATIONS`] distinct ones are
//! kept (the rest are counted), at most [`MAX_ACTORS`] actors each.

use std::collections::HashMap;

use crate::events::{ConnDecision, ConnReason, Connection, Roots, Timestamp};

/// Distinct destinations kept in the model; further ones are only counted.
pub const MAX_DESTINATIONS: usize = 10_000;
/// Destinations the HTML report lists (the rest are counted).
pub const TOP: usize = 200;
/// Processes or packages named per destination.
pub const MAX_ACTORS: usize = 8;
/// Pinned addresses named per destination.
pub const MAX_ADDRS: usize = 4;
/// Characters of a host name kept (a DNS name has at most 253).
pub const MAX_HOST_CHARS: usize = 256;
/// Characters of a connection's detail kept.
pub const MAX_DETAIL: usize = 200;

/// Connections to one destination with one decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Destination {
    /// The name the job asked for, else the address it connected to.
    pub host: String,
    /// `host` is a name (not an address).
    pub named: bool,
    pub port: u16,
    pub decision: ConnDecision,
    /// The reason of the first connection.
    pub reason: ConnReason,
    /// The deciding rule in words, when one decided.
    pub rule: Option<String>,
    /// Extra facts of the first connection that had any (the TLS name that
    /// disagreed, the limit hit …).
    pub detail: String,
    /// The addresses vetto connected to (pinned answers), first seen first.
    pub addrs: Vec<String>,
    pub connections: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
    /// Who made them: the package, else the program; first seen first.
    pub actors: Vec<String>,
    /// Further distinct actors not named.
    pub more_actors: u64,
    pub first: Timestamp,
    pub last: Timestamp,
}

impl Destination {
    /// `host:port`, `[v6]:port` for an IPv6 address.
    pub fn display(&self) -> String {
        if !self.named && self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Who made a connection, as reviewers read it.
pub fn actor(c: &Connection, roots: &Roots) -> String {
    match (&c.attribution, &c.process) {
        (Some(p), _) => p.display(),
        (None, Some(p)) if !p.exe.as_os_str().is_empty() => roots.normalise(&p.exe),
        _ => "an unknown process".to_string(),
    }
}

/// Folds connections into destinations.
#[derive(Debug, Default)]
pub struct Fold {
    by_key: HashMap<(String, u16, ConnDecision), usize>,
    list: Vec<Destination>,
    /// Connections to destinations beyond [`MAX_DESTINATIONS`].
    pub dropped: u64,
}

impl Fold {
    pub fn add(&mut self, c: &Connection, roots: &Roots) {
        // A name comes from the job (a CONNECT line, a Host header): kept
        // to a name's length, so ten thousand huge ones stay small.
        let clipped = |h: &str| crate::text::clip(h, MAX_HOST_CHARS).into_owned();
        let (host, named) = match (&c.host, &c.addr) {
            (Some(h), _) => (clipped(&h.trim_end_matches('.').to_ascii_lowercase()), true),
            (None, Some(a)) => (clipped(a), false),
            (None, None) => ("(unknown)".to_string(), false),
        };
        let key = (host, c.port, c.decision);
        let who = actor(c, roots);
        let i = match self.by_key.get(&key) {
            Some(&i) => i,
            None if self.list.len() >= MAX_DESTINATIONS => {
                self.dropped += 1;
                return;
            }
            None => {
                self.list.push(Destination {
                    host: key.0.clone(),
                    named,
                    port: c.port,
                    decision: c.decision,
                    reason: c.reason,
                    rule: c.rule.clone(),
                    detail: String::new(),
                    addrs: Vec::new(),
                    connections: 0,
                    bytes_up: 0,
                    bytes_down: 0,
                    actors: Vec::new(),
                    more_actors: 0,
                    first: c.time,
                    last: c.time,
                });
                self.by_key.insert(key, self.list.len() - 1);
                self.list.len() - 1
            }
        };
        let d = &mut self.list[i];
        d.connections += 1;
        d.bytes_up = d.bytes_up.saturating_add(c.bytes_up);
        d.bytes_down = d.bytes_down.saturating_add(c.bytes_down);
        d.first = d.first.min(c.time);
        d.last = d.last.max(c.time);
        if d.rule.is_none() {
            d.rule.clone_from(&c.rule);
        }
        if d.detail.is_empty() {
            d.detail = crate::text::clip(&c.detail, MAX_DETAIL).into_owned();
        }
        if let Some(a) = &c.addr
            && named
            && !d.addrs.contains(a)
            && d.addrs.len() < MAX_ADDRS
        {
            d.addrs.push(clipped(a));
        }
        if !d.actors.contains(&who) {
            if d.actors.len() < MAX_ACTORS {
                d.actors.push(who);
            } else {
                d.more_actors += 1;
            }
        }
    }

    /// Denied first, then observed (audit), then failed, then allowed; within each the
    /// most connections first, then by name and port.
    pub fn finish(self) -> (Vec<Destination>, u64) {
        let mut list = self.list;
        let rank = |d: ConnDecision| match d {
            ConnDecision::Denied => 0,
            ConnDecision::Observed => 1,
            ConnDecision::Failed => 2,
            ConnDecision::Allowed => 3,
        };
        list.sort_by(|a, b| {
            rank(a.decision)
                .cmp(&rank(b.decision))
                .then(b.connections.cmp(&a.connections))
                .then_with(|| a.host.cmp(&b.host))
                .then(a.port.cmp(&b.port))
        });
        (list, self.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    /// Connections fold by (host, port, decision), case and trailing dot
    /// aside; bytes add up; a name the job made huge is kept short.
    #[test]
    fn connections_fold_by_destination_and_stay_bounded() {
        let base = fixture::egress_connections().remove(0);
        let mut fold = Fold::default();
        let roots = Roots::default();
        for host in ["Registry.NPMJS.org.", "registry.npmjs.org"] {
            let mut c = base.clone();
            c.host = Some(host.into());
            fold.add(&c, &roots);
        }
        let mut huge = base.clone();
        huge.host = Some("a".repeat(16 * 1024));
        fold.add(&huge, &roots);
        let mut other_port = base.clone();
        other_port.port = 80;
        fold.add(&other_port, &roots);
        let (list, dropped) = fold.finish();
        assert_eq!(dropped, 0);
        assert_eq!(list.len(), 3, "{list:#?}");
        assert_eq!(list[0].display(), "registry.npmjs.org:443");
        assert_eq!(list[0].connections, 2);
        assert_eq!(list[0].bytes_down, 2 * base.bytes_down);
        assert_eq!(list[0].addrs, ["104.16.0.1"]);
        assert_eq!(list[0].actors, ["/usr/bin/npm"]);
        assert!(
            list.iter()
                .all(|d| d.host.chars().count() <= MAX_HOST_CHARS)
        );
    }
}
