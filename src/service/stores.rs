//! The rooms' stores, opened at start: one per room, in memory or on Redis. A Redis that does
//! not answer at start is served like an outage that begins later (`on_error`), and joined when
//! it answers.

use std::sync::Arc;

use super::start::{RunOptions, StartError};
use crate::config::Config;
use crate::config::model::Backend;
use crate::store::memory::MemoryStore;
use crate::store::redis::{
    DeferredRedisStore, RedisOptions, RedisStore, ReplicaAcks, SentinelAuth, TimeSource,
};
use crate::store::{Store, StoreError};

/// The runtime the store's connections live on: kept for as long as the server runs.
pub struct StoreRuntime {
    _runtime: Option<tokio::runtime::Runtime>,
}

/// The rooms' stores as the start found them.
pub(super) struct Opened {
    /// One per room, in the config's order.
    pub stores: Vec<Arc<dyn Store>>,
    /// The rooms whose store did not answer at start: they serve as during an outage until it
    /// does.
    pub unreachable: Vec<String>,
    pub runtime: StoreRuntime,
}

/// One store per room (each room's keys carry its own hash tag); on Redis they are connected
/// on one runtime, which must outlive every Pingora service that calls into it.
pub(super) fn open_stores(config: &Config, options: &RunOptions) -> Result<Opened, StartError> {
    let Backend::Redis { url } = &config.store.backend else {
        let stores = config
            .rooms
            .iter()
            .map(|_| Arc::new(MemoryStore::new(options.clock.clone(), options.seed)) as _)
            .collect();
        return Ok(Opened {
            stores,
            unreachable: Vec::new(),
            runtime: StoreRuntime { _runtime: None },
        });
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("waitroom-store")
        .enable_all()
        .build()?;
    let mut stores: Vec<Arc<dyn Store>> = Vec::with_capacity(config.rooms.len());
    let mut unreachable = Vec::new();
    for room in &config.rooms {
        let redis_options = RedisOptions {
            url: url.clone(),
            prefix: config.store.prefix.clone(),
            room: room.id.clone(),
            connect_timeout: config.store.connect_timeout,
            command_timeout: config.store.command_timeout,
            time: if options.redis_follows_clock {
                TimeSource::Clock(options.clock.clone())
            } else {
                TimeSource::Server
            },
            seed: options.seed,
            sentinel_auth: sentinel_auth(config),
            replica_acks: (config.store.replica_acks > 0).then_some(ReplicaAcks {
                replicas: config.store.replica_acks,
                timeout: config.store.replica_ack_timeout,
            }),
        };
        // On a thread of its own: the caller may itself be inside a runtime (tests, embedding).
        let connected = std::thread::scope(|scope| {
            scope
                .spawn(|| runtime.block_on(RedisStore::connect(redis_options.clone())))
                .join()
        })
        .map_err(|_| StartError::StoreThread)?;
        match connected {
            Ok(store) => stores.push(Arc::new(store)),
            // An outage at start is served like one that begins later: by `on_error`, until
            // Redis answers. Anything else (an invalid URL) no retry can mend: the start fails.
            Err(e @ StoreError::Unavailable(_)) => {
                let store = DeferredRedisStore::start(redis_options, runtime.handle(), &e);
                stores.push(Arc::new(store));
                unreachable.push(room.id.clone());
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Opened {
        stores,
        unreachable,
        runtime: StoreRuntime {
            _runtime: Some(runtime),
        },
    })
}

/// `store.sentinel_username` and `sentinel_password`, as the Redis store takes them.
pub(super) fn sentinel_auth(config: &Config) -> SentinelAuth {
    let auth = &config.store.sentinel_auth;
    SentinelAuth {
        username: auth.username.clone(),
        password: auth.password.clone(),
    }
}
