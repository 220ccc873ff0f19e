//! Host-side resolution with a per-session pin cache: the first answer for
//! a name is the answer for the whole session (so DNS rebinding cannot
//! move an allowed name to another address mid-session), and `--resolve`
//! pins answer without asking DNS at all.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Duration;

use tokio::sync::Mutex;

/// Why a name has no addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ResolveError {
    /// DNS gave no answer.
    NotFound,
    /// The cache is full (`Limits::max_names`).
    Full,
}

/// Answers per name are capped too.
const MAX_ADDRS: usize = 16;

pub(crate) struct Resolver {
    cache: Mutex<HashMap<String, Vec<IpAddr>>>,
    max_names: usize,
    /// A lookup slower than this counts as no answer.
    timeout: Duration,
}

impl Resolver {
    pub(crate) fn new(max_names: usize, timeout: Duration) -> Resolver {
        Resolver {
            cache: Mutex::new(HashMap::new()),
            max_names,
            timeout,
        }
    }

    /// The session's addresses for `name` (already normalised): the first
    /// answer stored wins, also when two connections looked up at once.
    pub(crate) async fn resolve(&self, name: &str, port: u16) -> Result<Vec<IpAddr>, ResolveError> {
        {
            let cache = self.cache.lock().await;
            if let Some(addrs) = cache.get(name) {
                return Ok(addrs.clone());
            }
            if cache.len() >= self.max_names {
                return Err(ResolveError::Full);
            }
        }
        let mut addrs: Vec<IpAddr> = Vec::new();
        if let Ok(Ok(it)) =
            tokio::time::timeout(self.timeout, tokio::net::lookup_host((name, port))).await
        {
            for ip in it.map(|sa| sa.ip()) {
                if !addrs.contains(&ip) && addrs.len() < MAX_ADDRS {
                    addrs.push(ip);
                }
            }
        }
        if addrs.is_empty() {
            return Err(ResolveError::NotFound);
        }
        let mut cache = self.cache.lock().await;
        if cache.len() >= self.max_names && !cache.contains_key(name) {
            return Err(ResolveError::Full);
        }
        Ok(cache.entry(name.to_string()).or_insert(addrs).clone())
    }
}

#[cfg(test)]
#[expect(clippy::unwrap_used, reason = "tests")]
mod tests {
    use super::*;

    #[test]
    fn the_first_answer_is_kept_and_the_cache_is_bounded() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let r = Resolver::new(1, Duration::from_secs(30));
            // An answer the session already has: DNS is not asked again, so
            // a name cannot be rebound to another address mid-session.
            let earlier: Vec<IpAddr> = vec!["192.0.2.1".parse().unwrap()];
            r.cache
                .lock()
                .await
                .insert("localhost".into(), earlier.clone());
            assert_eq!(r.resolve("localhost", 443).await.unwrap(), earlier);
            assert_eq!(
                r.resolve("other.invalid", 80).await,
                Err(ResolveError::Full)
            );
            let empty = Resolver::new(8, Duration::from_secs(30));
            assert_eq!(
                empty.resolve("name.invalid", 80).await,
                Err(ResolveError::NotFound)
            );
        });
    }
}
