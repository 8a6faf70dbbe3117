//! The origin's addresses, looked up off the request path: once at start (an origin whose name
//! does not resolve stops the start and `--test`, naming `origin.address`), then in the
//! background every `origin.resolve_interval`. A lookup that fails keeps the last good
//! addresses: a DNS hiccup, or a Service renamed under a running proxy, must not turn every
//! admitted visitor away. A request only ever reads what is known (`OriginAddresses::pick`).

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;

use crate::observe::OriginMetrics;

#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error("{0}")]
    Lookup(String),
    #[error("the name has no address")]
    NoAddress,
    #[error("{0:?} is not host:port")]
    NotHostPort(String),
    #[error("the lookup did not finish: {0}")]
    Interrupted(String),
}

/// Looks a name up: the system's resolver in production, a scripted one in tests.
pub trait Resolve: Send + Sync {
    /// Every address of `host`, with `port`. Blocking: called at start and on a blocking thread.
    fn lookup(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError>;
}

/// getaddrinfo, as the rest of the system sees the name (/etc/hosts, search domains).
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn lookup(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
        (host, port)
            .to_socket_addrs()
            .map(Iterator::collect)
            .map_err(|e| ResolveError::Lookup(e.to_string()))
    }
}

/// What `origin.address` names.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    /// A literal address: nothing to look up, ever.
    Fixed(SocketAddr),
    Named {
        host: String,
        port: u16,
    },
}

impl Target {
    fn parse(address: &str) -> Result<Self, ResolveError> {
        if let Ok(fixed) = address.parse::<SocketAddr>() {
            return Ok(Self::Fixed(fixed));
        }
        let not_host_port = || ResolveError::NotHostPort(address.to_owned());
        let (host, port) = address.rsplit_once(':').ok_or_else(not_host_port)?;
        let port = port.parse().map_err(|_| not_host_port())?;
        if host.is_empty() {
            return Err(not_host_port());
        }
        Ok(Self::Named {
            host: host.to_owned(),
            port,
        })
    }
}

/// The origin's addresses as last looked up, shared by the proxy (reads) and the resolver
/// (writes).
pub struct OriginAddresses {
    address: String,
    target: Target,
    known: ArcSwap<Vec<SocketAddr>>,
    /// Turns through several addresses, one request after the other.
    next: AtomicUsize,
    /// The last lookup failed: logged once when it starts failing and once when it recovers.
    failing: AtomicBool,
    metrics: OriginMetrics,
}

impl OriginAddresses {
    /// `address` as `origin.address` has it (host:port or a literal address); nothing is looked
    /// up yet.
    pub fn new(address: &str, metrics: OriginMetrics) -> Result<Self, ResolveError> {
        let target = Target::parse(address)?;
        let known = match &target {
            Target::Fixed(fixed) => vec![*fixed],
            Target::Named { .. } => Vec::new(),
        };
        metrics.addresses.set(gauge(known.len()));
        Ok(Self {
            address: address.to_owned(),
            target,
            known: ArcSwap::from_pointee(known),
            next: AtomicUsize::new(0),
            failing: AtomicBool::new(false),
            metrics,
        })
    }

    /// A name to look up in the background (not a literal address).
    pub fn is_named(&self) -> bool {
        matches!(self.target, Target::Named { .. })
    }

    /// A request's turn: its first try goes to the address after the previous request's, a
    /// retry (`turn + 1`) to the one after that.
    pub fn turn(&self) -> usize {
        // One shared counter for every request of every thread: not touched when there is
        // nothing to turn through.
        match self.target {
            Target::Fixed(_) => 0,
            Target::Named { .. } => self.next.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The address for `turn`, if any is known.
    pub fn pick(&self, turn: usize) -> Option<SocketAddr> {
        if let Target::Fixed(fixed) = self.target {
            return Some(fixed);
        }
        let known = self.known.load();
        match known.len() {
            0 => None,
            n => known.get(turn % n).copied(),
        }
    }

    /// How many addresses are known now.
    pub fn count(&self) -> usize {
        match self.target {
            Target::Fixed(_) => 1,
            Target::Named { .. } => self.known.load().len(),
        }
    }

    /// Looks the name up now and keeps the answer; on failure the last good addresses stay, and
    /// the caller reports the error (the start, `--test`): it is not logged here.
    pub fn refresh(&self, resolver: &dyn Resolve) -> Result<(), ResolveError> {
        let Target::Named { host, port } = &self.target else {
            return Ok(());
        };
        let found = resolver.lookup(host, *port);
        self.keep(found, Quiet)
    }

    /// Keeps the outcome of one lookup, logging a change of state once (unless `Quiet`).
    fn keep(
        &self,
        found: Result<Vec<SocketAddr>, ResolveError>,
        failure: Report,
    ) -> Result<(), ResolveError> {
        // Sorted: a DNS that answers in turns is not a change of address.
        let found = found.and_then(|mut found| {
            found.sort_unstable();
            found.dedup();
            if found.is_empty() {
                Err(ResolveError::NoAddress)
            } else {
                Ok(found)
            }
        });
        match found {
            Ok(found) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    log::info!("origin.address {} resolves again", self.address);
                }
                if **self.known.load() != found {
                    log::info!("origin.address {} is at {found:?}", self.address);
                    self.metrics.addresses.set(gauge(found.len()));
                    self.known.store(Arc::new(found));
                }
                Ok(())
            }
            Err(e) => {
                self.metrics.resolve_failures.inc();
                // The caller of a quiet lookup reports it: the next logged failure is news.
                if failure == Logged && !self.failing.swap(true, Ordering::Relaxed) {
                    let known = self.known.load();
                    if known.is_empty() {
                        log::warn!(
                            "origin.address {} does not resolve ({e}) and no address is known: \
                             forwarded requests get the 502 page until it does",
                            self.address
                        );
                    } else {
                        log::warn!(
                            "origin.address {} does not resolve ({e}): still using {:?}",
                            self.address,
                            **known
                        );
                    }
                }
                Err(e)
            }
        }
    }
}

/// Whether a failed lookup is logged by `keep` or reported by its caller.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Report {
    Logged,
    Quiet,
}
use Report::{Logged, Quiet};

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Looks the origin's name up every `every`, as a Pingora background service.
pub struct OriginResolver {
    origin: Arc<OriginAddresses>,
    resolver: Arc<dyn Resolve>,
    every: Duration,
}

impl OriginResolver {
    pub fn new(origin: Arc<OriginAddresses>, resolver: Arc<dyn Resolve>, every: Duration) -> Self {
        Self {
            origin,
            resolver,
            every,
        }
    }

    async fn once(&self) {
        let Target::Named { host, port } = self.origin.target.clone() else {
            return;
        };
        let resolver = self.resolver.clone();
        // getaddrinfo blocks, for as long as the DNS takes.
        let found = tokio::task::spawn_blocking(move || resolver.lookup(&host, port))
            .await
            .unwrap_or_else(|e| Err(ResolveError::Interrupted(e.to_string())));
        let _ = self.origin.keep(found, Logged);
    }
}

#[async_trait]
impl BackgroundService for OriginResolver {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        if !self.origin.is_named() {
            return;
        }
        // Looked up at start already: the first lookup here is one interval later.
        let now = tokio::time::Instant::now();
        let start = now.checked_add(self.every).unwrap_or(now);
        let mut interval = tokio::time::interval_at(start, self.every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => break,
                _ = interval.tick() => {}
            }
            // A DNS that does not answer holds the lookup for its own timeouts: not the exit.
            tokio::select! {
                _ = shutdown.changed() => break,
                () = self.once() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::MetricsRegistry;
    use std::sync::Mutex;

    /// Answers from a script, one answer per lookup, the last one for ever.
    struct Scripted(Mutex<Vec<Result<Vec<SocketAddr>, ResolveError>>>);

    impl Resolve for Scripted {
        fn lookup(&self, _host: &str, port: u16) -> Result<Vec<SocketAddr>, ResolveError> {
            let mut script = self.0.lock().unwrap();
            let answer = if script.len() > 1 {
                script.remove(0)
            } else {
                match script.first() {
                    Some(Ok(a)) => Ok(a.clone()),
                    _ => Err(ResolveError::Lookup("no such name".into())),
                }
            };
            answer.map(|a| {
                a.into_iter()
                    .map(|a| SocketAddr::new(a.ip(), port))
                    .collect()
            })
        }
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn origin(address: &str) -> (OriginAddresses, OriginMetrics) {
        let metrics = MetricsRegistry::new().origin();
        (
            OriginAddresses::new(address, metrics.clone()).unwrap(),
            metrics,
        )
    }

    #[test]
    fn a_literal_address_is_never_looked_up() {
        for (address, expected) in [
            ("127.0.0.1:80", "127.0.0.1:80"),
            ("[::1]:8080", "[::1]:8080"),
        ] {
            let (o, metrics) = origin(address);
            assert!(!o.is_named());
            assert_eq!(o.pick(o.turn()), Some(addr(expected)));
            let never = Scripted(Mutex::new(vec![]));
            o.refresh(&never).unwrap();
            assert_eq!(o.pick(usize::MAX), Some(addr(expected)));
            assert_eq!(metrics.addresses.get(), 1);
        }
    }

    #[test]
    fn a_name_keeps_its_last_good_addresses_when_a_lookup_fails() {
        let (o, metrics) = origin("shop:80");
        assert!(o.is_named());
        assert_eq!(
            o.pick(o.turn()),
            None,
            "nothing known before the first lookup"
        );
        let resolver = Scripted(Mutex::new(vec![
            Ok(vec![addr("10.0.0.1:0"), addr("10.0.0.2:0")]),
            Err(ResolveError::Lookup("no such name".into())),
            Err(ResolveError::Lookup("no such name".into())),
            Ok(vec![]),
            Ok(vec![addr("10.0.0.3:0")]),
        ]));
        o.refresh(&resolver).unwrap();
        assert_eq!(metrics.addresses.get(), 2);
        let picked: Vec<_> = (0..4).filter_map(|_| o.pick(o.turn())).collect();
        assert_eq!(picked.len(), 4);
        assert_ne!(picked[0], picked[1], "turns through the addresses");
        assert_eq!(picked[0], picked[2]);
        assert_eq!(picked[1], picked[3]);
        assert!(o.refresh(&resolver).is_err());
        assert!(o.refresh(&resolver).is_err());
        assert!(matches!(o.refresh(&resolver), Err(ResolveError::NoAddress)));
        assert_eq!(metrics.resolve_failures.get(), 3);
        assert_eq!(o.count(), 2);
        assert!(
            o.pick(o.turn())
                .is_some_and(|a| a.ip().to_string().starts_with("10.0.0."))
        );
        // A turn that wrapped around still picks an address.
        assert!(o.pick(usize::MAX).is_some());
        o.refresh(&resolver).unwrap();
        assert_eq!(o.pick(o.turn()), Some(addr("10.0.0.3:80")));
        assert_eq!(metrics.addresses.get(), 1);
    }

    #[test]
    fn a_name_that_never_resolved_has_no_address() {
        let (o, metrics) = origin("shop.invalid:80");
        let resolver = Scripted(Mutex::new(vec![Err(ResolveError::Lookup("nope".into()))]));
        assert!(o.refresh(&resolver).is_err());
        assert_eq!(o.pick(o.turn()), None);
        assert_eq!(metrics.addresses.get(), 0);
        assert_eq!(metrics.resolve_failures.get(), 1);
    }

    #[test]
    fn what_is_not_host_port_is_refused_without_a_panic() {
        for bad in ["shop", ":80", "shop:", "shop:99999", "shop:http", ""] {
            let metrics = MetricsRegistry::new().origin();
            assert!(OriginAddresses::new(bad, metrics).is_err(), "{bad:?}");
        }
    }
}
