//! The one task that sends the queued calls, in order: each POST signed when it is tried (a
//! fresh timestamp, the same body and event id), a few tries with a growing pause, every
//! outcome counted and every failure logged.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use pingora_core::services::background::BackgroundService;
use tokio::sync::{Mutex, mpsc};

use super::Queued;
use super::signature::{SIGNATURE_HEADER, TIMESTAMP_HEADER, sign};
use crate::config::model::NotifyConfig;
use crate::observe::NotifyResult;

/// Tries of one call, the first included.
const TRIES: u32 = 4;
/// The pause after the first failed try; each later one doubles it (0.25 s, 0.5 s, 1 s).
const FIRST_PAUSE: Duration = Duration::from_millis(250);
/// A receiver slower than this counts as a failed try: the calls behind it wait.
const TRY_TIMEOUT: Duration = Duration::from_secs(5);

/// Why one try failed, as the log says it.
#[derive(Debug, thiserror::Error)]
enum TryError {
    #[error("the receiver answered {0}")]
    Status(reqwest::StatusCode),
    #[error("{0}")]
    Request(#[from] reqwest::Error),
}

/// The queue's receiving end, drained by `start` (a Pingora background service).
pub struct Delivery {
    url: reqwest::Url,
    secret: Vec<u8>,
    receiver: Mutex<mpsc::Receiver<Queued>>,
    client: reqwest::Client,
}

impl Delivery {
    pub(super) fn new(
        config: &NotifyConfig,
        receiver: mpsc::Receiver<Queued>,
    ) -> Result<Self, reqwest::Error> {
        Ok(Self {
            url: config.webhook_url.clone(),
            secret: config.secret.as_bytes().to_vec(),
            receiver: Mutex::new(receiver),
            client: reqwest::Client::builder()
                .timeout(TRY_TIMEOUT)
                // A redirect would carry the signed body somewhere the shop did not name.
                .redirect(reqwest::redirect::Policy::none())
                .build()?,
        })
    }

    /// The next call queued, not sent: what a test of the queue looks at.
    #[cfg(test)]
    pub(super) fn take_queued(&self) -> Option<super::Called> {
        self.receiver
            .try_lock()
            .ok()?
            .try_recv()
            .ok()
            .map(|q| q.called)
    }

    async fn deliver(&self, queued: Queued) {
        let called = &queued.called;
        let body = match serde_json::to_vec(called) {
            Ok(body) => body,
            Err(e) => {
                log::error!(
                    "notify: call of queue id {} not encoded: {e}",
                    called.queue_id
                );
                queued.metrics.notification(NotifyResult::Failed);
                return;
            }
        };
        let mut pause = FIRST_PAUSE;
        for attempt in 1..=TRIES {
            match self.try_once(&body).await {
                Ok(()) => {
                    queued.metrics.notification(NotifyResult::Sent);
                    return;
                }
                Err(e) if attempt < TRIES => {
                    log::info!(
                        "notify: call of queue id {} in room {}, try {attempt} of {TRIES}: {e}; \
                         again in {} ms",
                        called.queue_id,
                        called.room,
                        pause.as_millis()
                    );
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                Err(e) => {
                    log::warn!(
                        "notify: call of queue id {} in room {} (event {}) not sent after \
                         {TRIES} tries: {e}",
                        called.queue_id,
                        called.room,
                        called.event_id
                    );
                    queued.metrics.notification(NotifyResult::Failed);
                }
            }
        }
    }

    async fn try_once(&self, body: &[u8]) -> Result<(), TryError> {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let response = self
            .client
            .post(self.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header(TIMESTAMP_HEADER, timestamp.to_string())
            .header(SIGNATURE_HEADER, sign(&self.secret, timestamp, body))
            .body(body.to_vec())
            .send()
            .await?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(TryError::Status(response.status()))
        }
    }
}

#[async_trait]
impl BackgroundService for Delivery {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let mut receiver = self.receiver.lock().await;
        loop {
            tokio::select! {
                next = receiver.recv() => match next {
                    Some(queued) => self.deliver(queued).await,
                    None => return,
                },
                _ = shutdown.changed() => {
                    if !receiver.is_empty() {
                        log::warn!(
                            "notify: stopping with {} calls not sent",
                            receiver.len()
                        );
                    }
                    return;
                }
            }
        }
    }
}
