//! Which secret was put in which request, by whom (`--secret`, issue
//! P13): folded from the requests the proxy recorded on the connections
//! it read. Never a value: the records hold names, and each request's path
//! as the job sent it (with the placeholder).

use std::collections::HashMap;

use crate::events::{Connection, Roots};

/// Distinct uses listed; the rest are counted.
pub const MAX_USES: usize = 100;

/// One kind of use: the same secret, request line, status and actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretUse {
    pub secret: String,
    /// The host, and its port unless 443.
    pub host: String,
    pub method: String,
    pub path: String,
    pub status: Option<u16>,
    /// The process or package, as the destinations table names it.
    pub actor: String,
    pub count: u64,
}

type Key = (String, String, String, String, Option<u16>, String);

/// Folds connections' request records into uses.
#[derive(Debug, Default)]
pub struct Fold {
    by_key: HashMap<Key, usize>,
    list: Vec<SecretUse>,
    /// Uses beyond [`MAX_USES`] distinct ones.
    dropped: u64,
}

impl Fold {
    pub fn add(&mut self, c: &Connection, roots: &Roots) {
        let name = c.host.as_deref().unwrap_or("?");
        let host = match c.port {
            443 => name.to_string(),
            port => format!("{name}:{port}"),
        };
        for r in &c.requests {
            for secret in &r.secrets {
                let actor = super::destinations::actor(c, roots);
                let key = (
                    secret.clone(),
                    host.clone(),
                    r.method.clone(),
                    r.path.clone(),
                    r.status,
                    actor.clone(),
                );
                match self.by_key.get(&key) {
                    Some(&i) => self.list[i].count += 1,
                    None if self.list.len() >= MAX_USES => self.dropped += 1,
                    None => {
                        self.by_key.insert(key, self.list.len());
                        self.list.push(SecretUse {
                            secret: secret.clone(),
                            host: host.clone(),
                            method: r.method.clone(),
                            path: r.path.clone(),
                            status: r.status,
                            actor,
                            count: 1,
                        });
                    }
                }
            }
        }
    }

    /// The uses, by secret, then in the order they came; and how many
    /// more were not listed.
    pub fn finish(mut self) -> (Vec<SecretUse>, u64) {
        self.list.sort_by(|a, b| a.secret.cmp(&b.secret));
        (self.list, self.dropped)
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn uses_are_folded_by_secret_request_status_and_actor() {
        let mut c = fixture::egress_connections().remove(0);
        c.host = Some("registry.test".into());
        c.requests = vec![
            crate::events::HttpRequest {
                method: "GET".into(),
                path: "/pkg".into(),
                status: Some(200),
                secrets: vec!["NPM_TOKEN".into()],
            },
            crate::events::HttpRequest {
                method: "GET".into(),
                path: "/pkg".into(),
                status: Some(200),
                secrets: vec!["NPM_TOKEN".into()],
            },
            crate::events::HttpRequest {
                method: "GET".into(),
                path: "/-/ping".into(),
                status: Some(200),
                secrets: vec![],
            },
        ];
        let mut fold = Fold::default();
        fold.add(&c, &Roots::default());
        let (uses, dropped) = fold.finish();
        assert_eq!(dropped, 0);
        assert_eq!(uses.len(), 1);
        let u = uses.first().unwrap();
        assert_eq!(
            (
                u.secret.as_str(),
                u.host.as_str(),
                u.count,
                u.actor.as_str()
            ),
            ("NPM_TOKEN", "registry.test", 2, "/usr/bin/npm")
        );
    }
}
