//! The connections to Redis: one server or a cluster for the commands, and a subscribed one for
//! the revocation feed; the time limits on every call; URLs kept out of messages but for their
//! hosts.

use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{Client, Cmd, Pipeline, ProtocolVersion, PushInfo, RedisError, RedisFuture, Value};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

use super::RedisOptions;
use super::sentinel::{FollowedMaster, SentinelConn, SentinelUrl};
use crate::store::{StoreError, StoreResult};

/// A reconnection tried within one call gives up after this many attempts; the next call tries
/// again.
const RECONNECT_RETRIES: usize = 2;

/// Why a call to Redis failed.
#[derive(Debug, thiserror::Error)]
pub(super) enum Failure {
    #[error(transparent)]
    Redis(#[from] RedisError),
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
}

impl Failure {
    /// Malformed data (a script found garbage, a key of the wrong type) is corrupt; anything else
    /// (connection, timeout, server loading or read-only) leaves the store unavailable.
    pub(super) fn in_script(self, script: &str) -> StoreError {
        match &self {
            Failure::Redis(e) if matches!(e.code(), Some("CORRUPT" | "WRONGTYPE")) => {
                StoreError::Corrupt(format!("{script}: {}", e.detail().unwrap_or_default()))
            }
            _ => StoreError::Unavailable(format!("redis {script}: {self}")),
        }
    }

    fn context(self, what: &str) -> StoreError {
        let message = format!("{what}: redis: {self}");
        if self.is_refusal() {
            StoreError::Refused(message)
        } else {
            StoreError::Unavailable(message)
        }
    }

    fn is_refusal(&self) -> bool {
        match self {
            Failure::Redis(e) => refuses(e),
            Failure::TimedOut(_) => false,
        }
    }
}

/// Redis answered, and refused this proxy's credentials or configuration: waiting for it
/// changes nothing, unlike a server that does not answer (yet).
pub(super) fn refuses(e: &RedisError) -> bool {
    matches!(
        e.kind(),
        redis::ErrorKind::AuthenticationFailed | redis::ErrorKind::InvalidClientConfig
    ) || matches!(e.code(), Some("NOAUTH" | "WRONGPASS" | "NOPERM"))
}

impl From<Failure> for StoreError {
    fn from(failure: Failure) -> Self {
        StoreError::Unavailable(format!("redis: {failure}"))
    }
}

/// Awaits a Redis future for at most `limit`.
pub(super) async fn within<T>(
    limit: Duration,
    fut: impl Future<Output = redis::RedisResult<T>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(limit, fut).await {
        Ok(result) => Ok(result?),
        Err(_) => Err(Failure::TimedOut(limit)),
    }
}

/// One Redis server, a cluster, or the master Sentinel names.
#[derive(Clone)]
pub(super) enum Conn {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
    Sentinel(SentinelConn),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
            Conn::Sentinel(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Sentinel(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
            Conn::Sentinel(c) => c.get_db(),
        }
    }
}

/// A store's connections, subscribed to its revocations.
pub(super) struct Connections {
    pub(super) conn: Conn,
    /// A connection of its own to the same server for the replicas' acknowledgements (`WAIT`
    /// blocks the connection it is sent on), when the store asks for them.
    pub(super) acks: Option<Conn>,
    pub(super) feed: Feed,
    /// What the feed receives.
    pub(super) pushes: UnboundedReceiver<PushInfo>,
}

/// The subscribed connection: it reconnects (and subscribes again) when used after an outage;
/// behind Sentinel it moves to the new master after a failover.
pub(super) struct Feed {
    conn: ConnectionManager,
    channel: String,
    follows: Option<Follows>,
}

/// What a feed behind Sentinel needs to move.
struct Follows {
    master: std::sync::Arc<FollowedMaster>,
    /// The master the feed is connected to.
    address: String,
    config: ConnectionManagerConfig,
    pushes: UnboundedSender<PushInfo>,
}

impl Feed {
    /// Pings the feed (so that it reconnects after an outage); behind Sentinel, a feed whose
    /// master no longer answers is opened again on the master the Sentinels name now.
    pub(super) async fn keep(&mut self, limit: Duration) -> Result<(), Failure> {
        let pinged = within(
            limit,
            redis::cmd("PING").query_async::<Value>(&mut self.conn),
        )
        .await;
        let Err(failure) = pinged else {
            return Ok(());
        };
        let Some(follows) = &mut self.follows else {
            return Err(failure);
        };
        let (address, client) = within(limit, follows.master.master_client()).await?;
        if address == follows.address {
            return Err(failure);
        }
        let config = follows
            .config
            .clone()
            .set_push_sender(follows.pushes.clone())
            .set_automatic_resubscription();
        let mut conn = within(
            limit,
            ConnectionManager::new_with_config(resp3(&client)?, config),
        )
        .await?;
        within(limit, conn.subscribe(&self.channel)).await?;
        log::info!("redis: the revocation feed follows the master to {address}");
        follows.address = address;
        self.conn = conn;
        Ok(())
    }
}

/// The same server, spoken to in RESP3 (pushes need it).
fn resp3(client: &Client) -> Result<Client, Failure> {
    let info = client.get_connection_info().clone();
    let settings = info
        .redis_settings()
        .clone()
        .set_protocol(ProtocolVersion::RESP3);
    Ok(Client::open(info.set_redis_settings(settings))?)
}

/// Connects to the server, cluster or Sentinels' master `options.url` names and subscribes to
/// `channel`.
pub(super) async fn connect(options: &RedisOptions, channel: &str) -> StoreResult<Connections> {
    let RedisOptions {
        url,
        sentinel_auth,
        connect_timeout,
        command_timeout,
        ..
    } = options;
    let (connect_timeout, command_timeout) = (*connect_timeout, *command_timeout);
    let invalid = |source| StoreError::InvalidUrl {
        url: redacted(url),
        source,
    };
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(connect_timeout))
        .set_response_timeout(Some(command_timeout))
        .set_number_of_retries(RECONNECT_RETRIES)
        .set_max_delay(command_timeout / 4);
    let sentinel_url = match SentinelUrl::parse(url) {
        Some(Ok(sentinel)) => Some(sentinel),
        Some(Err(why)) => {
            let kind = redis::ErrorKind::InvalidClientConfig;
            return Err(invalid(RedisError::from((kind, "Sentinel URL", why))));
        }
        None => None,
    };
    let follow = |sentinel: &SentinelUrl| {
        FollowedMaster::new(
            sentinel.clone(),
            sentinel_auth,
            config.clone(),
            connect_timeout,
        )
        .map(std::sync::Arc::new)
        .map_err(invalid)
    };
    let sentinel = sentinel_url.as_ref().map(follow).transpose()?;
    let nodes = cluster_nodes(url);
    if nodes.is_some() && options.replica_acks.is_some() {
        let kind = redis::ErrorKind::InvalidClientConfig;
        let why = "replica acknowledgements (WAIT) are not supported on a cluster";
        return Err(invalid(RedisError::from((kind, why))));
    }
    let first_node = nodes
        .as_ref()
        .and_then(|n| n.first())
        .map_or(url.as_str(), String::as_str);
    let (master_address, client) = match &sentinel {
        Some(master) => {
            let (address, client) = within(connect_timeout, master.master_client())
                .await
                .map_err(|e| {
                    let what = if !e.is_refusal() {
                        format!("no master from the Sentinels of {}", redacted(url))
                    } else if sentinel_auth.password.is_some() {
                        format!(
                            "the Sentinels of {} refused this proxy's Sentinel credentials \
                             (store.sentinel_username, store.sentinel_password)",
                            redacted(url)
                        )
                    } else {
                        format!(
                            "the Sentinels of {} ask for a password of their own: set \
                             store.sentinel_password (or WR_SENTINEL_PASSWORD)",
                            redacted(url)
                        )
                    };
                    e.context(&what)
                })?;
            (Some(address), client)
        }
        None => (None, Client::open(first_node).map_err(invalid)?),
    };
    let cluster = match &nodes {
        Some(nodes) => Some(
            ClusterClient::builder(nodes.iter().map(String::as_str))
                .connection_timeout(connect_timeout)
                .response_timeout(command_timeout)
                .retries(RECONNECT_RETRIES as u32)
                .build()
                .map_err(invalid)?,
        ),
        None => None,
    };
    let open = |master: Option<std::sync::Arc<FollowedMaster>>| {
        let (client, config, cluster) = (client.clone(), config.clone(), cluster.clone());
        async move {
            let mut conn = match (cluster, master) {
                (Some(cluster), _) => {
                    Conn::Cluster(within(connect_timeout, cluster.get_async_connection()).await?)
                }
                (None, Some(master)) => Conn::Sentinel(SentinelConn(master)),
                (None, None) => Conn::Single(
                    within(
                        connect_timeout,
                        ConnectionManager::new_with_config(client, config),
                    )
                    .await?,
                ),
            };
            // A server that asks for a password opens a connection that has none, then refuses
            // its commands: asked here, a missing password says so at once.
            within(
                command_timeout,
                redis::cmd("PING").query_async::<()>(&mut conn),
            )
            .await?;
            Ok::<_, Failure>(conn)
        }
    };
    let cannot_connect = |e: Failure| e.context(&format!("cannot connect to {}", redacted(url)));
    let conn = open(sentinel.clone()).await.map_err(cannot_connect)?;
    // Behind Sentinel, a follower of its own: it moves to a new master when its own WAIT fails,
    // like the commands' follower when theirs do.
    let acks = match options.replica_acks {
        Some(_) => {
            let follower = sentinel_url.as_ref().map(follow).transpose()?;
            Some(open(follower).await.map_err(cannot_connect)?)
        }
        None => None,
    };

    // A second connection, on RESP3, receives the revocations of the other instances (in a
    // cluster, from the first node named: PUBLISH reaches every node).
    let feed_client = resp3(&client)?;
    let (tx, pushes) = unbounded_channel();
    let feed_config = config
        .clone()
        .set_push_sender(tx.clone())
        .set_automatic_resubscription();
    let mut feed = within(
        connect_timeout,
        ConnectionManager::new_with_config(feed_client, feed_config),
    )
    .await
    .map_err(|e| e.context("cannot open the revocation feed"))?;
    within(command_timeout, feed.subscribe(channel))
        .await
        .map_err(|e| e.context("cannot subscribe to revocations"))?;
    let follows = sentinel
        .zip(master_address)
        .map(|(master, address)| Follows {
            master,
            address,
            config,
            pushes: tx,
        });
    let feed = Feed {
        conn: feed,
        channel: channel.to_owned(),
        follows,
    };
    Ok(Connections {
        conn,
        acks,
        feed,
        pushes,
    })
}

/// The user information of what follows a URL's `://` (`user:password@`, or empty: it ends at
/// the last `@`, as a password may hold one) and the rest.
pub(super) fn user_info(rest: &str) -> (String, &str) {
    match rest.rsplit_once('@') {
        Some((credentials, rest)) => (format!("{credentials}@"), rest),
        None => (String::new(), rest),
    }
}

/// The node URLs of a `redis+cluster://` or `rediss+cluster://` URL, None for any other URL.
fn cluster_nodes(url: &str) -> Option<Vec<String>> {
    let (scheme, rest) = if let Some(rest) = url.strip_prefix("redis+cluster://") {
        ("redis", rest)
    } else {
        ("rediss", url.strip_prefix("rediss+cluster://")?)
    };
    let (credentials, hosts) = user_info(rest);
    Some(
        hosts
            .split(',')
            .map(|host| format!("{scheme}://{credentials}{}", host.trim()))
            .collect(),
    )
}

/// The URL with neither user nor password, for messages: in the user info (`user:password@`)
/// and in the query of a socket's URL (`?pass=`, everything after it dropped). Misspelt URLs
/// are redacted too: whatever precedes the last `@` goes, even past a `/` or `?` that a password
/// should have percent-encoded; a URL without a scheme keeps nothing.
pub(super) fn redacted(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "…".to_owned();
    };
    // The query first: a socket's password may hold an `@` of its own.
    let rest = ["?pass=", "&pass="]
        .iter()
        .filter_map(|p| rest.find(p).map(|at| at + p.len()))
        .min()
        .map_or_else(|| rest.to_owned(), |end| format!("{}…", &rest[..end]));
    match rest.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://…@{host}"),
        None => format!("{scheme}://{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redaction_keeps_the_hosts_and_nothing_of_the_credentials() {
        for (url, shown) in [
            ("redis://127.0.0.1:6379/2", "redis://127.0.0.1:6379/2"),
            ("redis://user:pw@127.0.0.1:6379", "redis://…@127.0.0.1:6379"),
            (
                "rediss://:pw@redis.example:6380/1",
                "rediss://…@redis.example:6380/1",
            ),
            ("redis://:p%40ss@h", "redis://…@h"),
            ("redis://:p@ss@h", "redis://…@h"),
            ("redis://:p/s?s@h", "redis://…@h"),
            ("redis+cluster://u:pw@a:1,b:2", "redis+cluster://…@a:1,b:2"),
            (
                "redis+unix:///run/redis.sock?db=1&pass=pw",
                "redis+unix:///run/redis.sock?db=1&pass=…",
            ),
            (
                "unix:///s.sock?pass=p@w&user=u&db=1",
                "unix:///s.sock?pass=…",
            ),
            ("user:pw@host:6379", "…"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }

    #[test]
    fn a_cluster_url_names_every_node_with_the_credentials() {
        assert_eq!(
            cluster_nodes("rediss+cluster://u:p%40w@a:1, b:2"),
            Some(vec![
                "rediss://u:p%40w@a:1".into(),
                "rediss://u:p%40w@b:2".into()
            ])
        );
        assert_eq!(
            cluster_nodes("redis+cluster://a:1"),
            Some(vec!["redis://a:1".into()])
        );
        assert_eq!(cluster_nodes("redis://u:p@a:1"), None);
    }
}
