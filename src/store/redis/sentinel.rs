//! Redis behind Sentinel: the master is whichever server the Sentinels name now, and a failover
//! is followed without a restart. The URL is `redis+sentinel://[user:password@]host:port[,host:
//! port...]/master_name[/db]` (`rediss+sentinel://` for TLS to the master and the Sentinels); its
//! credentials are the master's. Sentinels that ask for a password of their own (`requirepass`,
//! or an ACL user) get [`SentinelAuth`], which never goes into a URL (URLs are printed redacted,
//! this is kept out of every message whole).
//!
//! Commands go to the master through a `ConnectionManager`, as with a single server. When a
//! command fails the way a dead or demoted master fails (the connection refused or dropped, no
//! answer, `READONLY` from a master turned replica), the Sentinels are asked again, at most every
//! [`ASK_AGAIN_AFTER`], and a new connection is opened when they name another master.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{
    Client, Cmd, IntoConnectionInfo, Pipeline, RedisError, RedisFuture, RedisResult, Value,
};

use super::conn::refuses;

/// The Sentinels are asked again at most this often while the master fails: an outage costs one
/// question per interval, not one per command.
pub(super) const ASK_AGAIN_AFTER: Duration = Duration::from_millis(250);

/// The Sentinels' own credentials; both None for Sentinels that ask for none. No `Debug`: there
/// is nothing in it to print.
#[derive(Clone, Default)]
pub struct SentinelAuth {
    pub username: Option<String>,
    pub password: Option<String>,
}

/// `redis+sentinel://…` read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SentinelUrl {
    /// `redis` or `rediss`.
    scheme: String,
    /// `user:password@`, or empty.
    userinfo: String,
    sentinels: Vec<String>,
    master_name: String,
    db: Option<String>,
}

impl SentinelUrl {
    /// None for any URL that is not a Sentinel one.
    pub(super) fn parse(url: &str) -> Option<Result<Self, String>> {
        let (scheme, rest) = if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            ("redis", rest)
        } else {
            ("rediss", url.strip_prefix("rediss+sentinel://")?)
        };
        let (userinfo, rest) = super::conn::user_info(rest);
        let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
        let mut parts = path.split('/').filter(|p| !p.is_empty());
        let master_name = parts.next().unwrap_or_default().to_owned();
        let db = parts.next().map(str::to_owned);
        let sentinels: Vec<String> = hosts
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(str::to_owned)
            .collect();
        Some(if sentinels.is_empty() {
            Err("names no Sentinel (host:port after ://)".into())
        } else if master_name.is_empty() {
            Err("names no master (/master_name after the Sentinels)".into())
        } else {
            Ok(Self {
                scheme: scheme.to_owned(),
                userinfo,
                sentinels,
                master_name,
                db,
            })
        })
    }

    /// The master at `host:port`, with the URL's credentials, TLS and database.
    fn master_url(&self, address: &str) -> String {
        let db = self
            .db
            .as_deref()
            .map(|db| format!("/{db}"))
            .unwrap_or_default();
        format!("{}://{}{address}{db}", self.scheme, self.userinfo)
    }

    fn sentinel_url(&self, address: &str) -> String {
        format!("{}://{address}", self.scheme)
    }

    /// A client for the Sentinel at `address`, which authenticates with `auth` on every
    /// connection it opens.
    fn sentinel_client(&self, address: &str, auth: &SentinelAuth) -> RedisResult<Client> {
        let info = self.sentinel_url(address).into_connection_info()?;
        let mut settings = info.redis_settings().clone();
        if let Some(username) = &auth.username {
            settings = settings.set_username(username);
        }
        if let Some(password) = &auth.password {
            settings = settings.set_password(password);
        }
        Client::open(info.set_redis_settings(settings))
    }
}

/// The master as the Sentinels name it, and the connection to it.
struct Current {
    address: String,
    conn: ConnectionManager,
}

/// The connection to whichever server is the master now.
pub(super) struct FollowedMaster {
    url: SentinelUrl,
    sentinels: Vec<Client>,
    config: ConnectionManagerConfig,
    connect_timeout: Duration,
    current: tokio::sync::Mutex<Option<Current>>,
    /// When a command last failed the way a lost master fails (None while it answers), and when
    /// the Sentinels were last asked.
    doubt: Mutex<(Option<Instant>, Option<Instant>)>,
}

impl FollowedMaster {
    pub(super) fn new(
        url: SentinelUrl,
        auth: &SentinelAuth,
        config: ConnectionManagerConfig,
        connect_timeout: Duration,
    ) -> RedisResult<Self> {
        let sentinels = url
            .sentinels
            .iter()
            .map(|s| url.sentinel_client(s, auth))
            .collect::<RedisResult<_>>()?;
        // Checked now: a bad URL is a configuration error, not an outage.
        Client::open(url.master_url("localhost:6379"))?;
        Ok(Self {
            url,
            sentinels,
            config,
            connect_timeout,
            current: tokio::sync::Mutex::new(None),
            doubt: Mutex::new((None, None)),
        })
    }

    /// The master's address as the first Sentinel that answers names it. When none does, a
    /// Sentinel's refusal of the credentials is the answer, rather than another one's silence:
    /// waiting mends an outage, not a wrong password, so the start must hear of the password.
    pub(super) async fn master_address(&self) -> RedisResult<String> {
        let mut refusal = None;
        let mut last = None;
        for sentinel in &self.sentinels {
            let asked = async {
                let mut conn = sentinel.get_multiplexed_async_connection().await?;
                let (host, port): (String, u16) = redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&self.url.master_name)
                    .query_async(&mut conn)
                    .await?;
                Ok::<_, RedisError>(if host.contains(':') {
                    format!("[{host}]:{port}")
                } else {
                    format!("{host}:{port}")
                })
            };
            match tokio::time::timeout(self.connect_timeout, asked).await {
                Ok(Ok(address)) => return Ok(address),
                Ok(Err(e)) if refuses(&e) => refusal = Some(e),
                Ok(Err(e)) => last = Some(e),
                Err(_) => {
                    last = Some(RedisError::from(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "a Sentinel did not answer",
                    )))
                }
            }
        }
        Err(refusal.or(last).unwrap_or_else(|| {
            RedisError::from(std::io::Error::other("no Sentinel is configured"))
        }))
    }

    /// A client for the master now (the revocation feed opens its own connection with it).
    pub(super) async fn master_client(&self) -> RedisResult<(String, Client)> {
        let address = self.master_address().await?;
        let client = Client::open(self.url.master_url(&address))?;
        Ok((address, client))
    }

    /// The connection to the master, asking the Sentinels first when there is none yet, or when
    /// the master failed lately and they were not asked since.
    async fn connection(&self) -> RedisResult<ConnectionManager> {
        let mut current = self.current.lock().await;
        if let Some(c) = current.as_ref().filter(|_| !self.ask_again()) {
            return Ok(c.conn.clone());
        }
        let address = match self.master_address().await {
            Ok(address) => address,
            // The Sentinels are unreachable too: the old master is as good a guess as any.
            Err(e) => return current.as_ref().map(|c| c.conn.clone()).ok_or(e),
        };
        if let Some(c) = current.as_ref().filter(|c| c.address == address) {
            return Ok(c.conn.clone());
        }
        let client = Client::open(self.url.master_url(&address))?;
        let conn = ConnectionManager::new_with_config(client, self.config.clone()).await?;
        log::warn!(
            "redis: following the master {:?} names: {address} (was {})",
            self.url.master_name,
            current.as_ref().map_or("none", |c| c.address.as_str())
        );
        *current = Some(Current {
            address,
            conn: conn.clone(),
        });
        Ok(conn)
    }

    /// Whether the Sentinels should be asked now (and, if so, notes that they are).
    fn ask_again(&self) -> bool {
        let mut doubt = self.doubt.lock().unwrap_or_else(|p| p.into_inner());
        let (failed_at, asked_at) = *doubt;
        let Some(failed_at) = failed_at else {
            return false;
        };
        let due =
            asked_at.is_none_or(|asked| asked < failed_at && asked.elapsed() >= ASK_AGAIN_AFTER);
        if due {
            doubt.1 = Some(Instant::now());
        }
        due
    }

    fn noted(&self, result: &RedisResult<impl Sized>) {
        let mut doubt = self.doubt.lock().unwrap_or_else(|p| p.into_inner());
        match result {
            Ok(_) => doubt.0 = None,
            // Each failure counts: a master the Sentinels still named a moment ago may be the
            // one they are about to replace.
            Err(e) if master_lost(e) => doubt.0 = Some(Instant::now()),
            Err(_) => {}
        }
    }
}

/// A failure that a failover explains: the master is gone, silent, or now a replica.
fn master_lost(e: &RedisError) -> bool {
    e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_io_error()
        || e.is_timeout()
        || e.code() == Some("READONLY")
        || e.code() == Some("MASTERDOWN")
}

/// [`FollowedMaster`] as a connection.
#[derive(Clone)]
pub(super) struct SentinelConn(pub(super) Arc<FollowedMaster>);

impl ConnectionLike for SentinelConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let mut conn = self.0.connection().await?;
            let result = conn.req_packed_command(cmd).await;
            self.0.noted(&result);
            result
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let mut conn = self.0.connection().await?;
            let result = conn.req_packed_commands(pipeline, offset, count).await;
            self.0.noted(&result);
            result
        })
    }

    fn get_db(&self) -> i64 {
        self.0
            .url
            .db
            .as_deref()
            .and_then(|db| db.parse().ok())
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_url_names_its_sentinels_master_and_credentials() {
        let url = SentinelUrl::parse("rediss+sentinel://u:p%40w@s1:26379, s2:26379/shop/2")
            .unwrap()
            .unwrap();
        assert_eq!(url.sentinels, vec!["s1:26379", "s2:26379"]);
        assert_eq!(url.master_name, "shop");
        assert_eq!(
            url.master_url("10.0.0.5:6379"),
            "rediss://u:p%40w@10.0.0.5:6379/2"
        );
        assert_eq!(url.sentinel_url("s1:26379"), "rediss://s1:26379");
        let plain = SentinelUrl::parse("redis+sentinel://s1:26379/shop")
            .unwrap()
            .unwrap();
        assert_eq!(plain.master_url("[::1]:6379"), "redis://[::1]:6379");
        assert!(SentinelUrl::parse("redis://h:1").is_none());
        assert!(
            SentinelUrl::parse("redis+sentinel://s1:26379")
                .unwrap()
                .is_err()
        );
        assert!(
            SentinelUrl::parse("redis+sentinel:///shop")
                .unwrap()
                .is_err()
        );
    }
}
