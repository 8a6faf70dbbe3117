//! The JSON a waiting visitor gets: Cloudflare's `cfWaitingRoom` object, key for key and in
//! Cloudflare's order, so a client written for Cloudflare works unchanged; our extras sit beside
//! it under `waitroom`.

use serde::Serialize;

use crate::clock::{Millis, rfc3339_ms};
use crate::config::{QueueingMethod, RoomSettings};
use crate::core::estimate::{WaitEstimate, minutes_ceil};
use crate::core::schedule::Phase;
use crate::gate::{ProofAsked, Shown};
use crate::language::Locale;
use crate::turnstile::Challenge;

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CfWaitingRoom {
    pub in_waiting_room: bool,
    pub wait_time_known: bool,
    pub wait_time: u64,
    #[serde(rename = "waitTime25Percentile")]
    pub wait_time_25_percentile: u64,
    #[serde(rename = "waitTime50Percentile")]
    pub wait_time_50_percentile: u64,
    #[serde(rename = "waitTime75Percentile")]
    pub wait_time_75_percentile: u64,
    pub wait_time_formatted: String,
    pub queue_is_full: bool,
    pub queue_all: bool,
    pub last_updated: String,
    pub refresh_interval_seconds: u64,
    pub queueing_method: &'static str,
    #[serde(rename = "isFIFOQueue")]
    pub is_fifo_queue: bool,
    pub is_random_queue: bool,
    pub is_passthrough_queue: bool,
    pub is_reject_queue: bool,
    pub is_event_active: bool,
    pub is_event_prequeueing: bool,
    pub time_until_event_start: u64,
    pub time_until_event_start_formatted: String,
    pub time_until_event_end: u64,
    pub time_until_event_end_formatted: String,
    pub shuffle_at_event_start: bool,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WaitroomExtras {
    /// Exact 1-based place in line, when the visitor waits and the store answered.
    pub position: Option<u64>,
    pub queued: u64,
    pub admitted: bool,
    pub eta_seconds: Option<u64>,
    /// The visitor's queue id (`core::queue_id`), while it waits: what it quotes to support.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_id: Option<String>,
    /// The scheduled event governing the room, for an exact countdown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub event: Option<EventExtras>,
    /// Set while the visitor must pass a challenge before it gets a place.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub challenge: Option<ChallengeBody>,
}

/// The challenge a newcomer must pass, as apps and pages read it.
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum ChallengeBody {
    Turnstile(Challenge),
    ProofOfWork(ProofOfWorkBody),
}

/// `"waitroom": {"challenge": {"kind": "proof_of_work", ...}}`: a nonce solves `seed` when
/// SHA-256 of the bytes of `seed` then the nonce (a decimal string) starts with at least
/// `difficulty_bits` zero bits; the answer is a form POST of `seed` and `nonce` to `url`.
#[derive(Debug, Clone, Serialize)]
pub struct ProofOfWorkBody {
    pub kind: &'static str,
    pub algorithm: &'static str,
    pub seed: String,
    pub difficulty_bits: u8,
    /// RFC 3339: the answer must arrive before.
    pub expires: String,
    pub url: String,
    /// Why the last answer was refused: wrong, expired, spent or malformed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<&'static str>,
    /// The ready solver for a page (`respond::proof::widget`); the JSON has the parts above.
    #[serde(skip)]
    pub widget: String,
}

impl ProofOfWorkBody {
    pub fn new(asked: &ProofAsked, url: &str) -> Self {
        Self {
            kind: "proof_of_work",
            algorithm: "sha256",
            seed: asked.seed.clone(),
            difficulty_bits: asked.difficulty_bits,
            expires: rfc3339_ms(asked.expires_at),
            url: url.to_owned(),
            refused: asked.refused.map(|r| r.label()),
            widget: String::new(),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EventExtras {
    pub name: String,
    /// "prequeue" or "running".
    pub phase: &'static str,
    pub starts_at: String,
    pub ends_at: String,
}

#[derive(Debug, Serialize)]
pub struct StatusBody {
    #[serde(rename = "cfWaitingRoom")]
    pub cf: CfWaitingRoom,
    pub waitroom: WaitroomExtras,
}

const UNAVAILABLE: &str = "unavailable";

/// Cloudflare's English wording of a wait estimate: the JSON keeps it whatever the page language.
pub fn wait_text(estimate: &WaitEstimate) -> String {
    Locale::EnUs
        .wait_text(estimate)
        .unwrap_or_else(|| UNAVAILABLE.into())
}

impl StatusBody {
    /// What a visitor would notice changing: everything but the time stamp.
    pub fn fingerprint(&self) -> (bool, bool, bool, u64, Option<u64>, u64, bool, Option<u64>) {
        (
            self.cf.in_waiting_room,
            self.cf.is_event_prequeueing,
            self.cf.is_reject_queue,
            self.cf.wait_time,
            self.waitroom.position,
            self.waitroom.queued,
            self.waitroom.admitted,
            self.waitroom.eta_seconds,
        )
    }

    pub fn new(settings: &RoomSettings, standing: Shown, now: Millis) -> Self {
        let method = settings.queueing_method;
        let (in_waiting_room, position, queued, estimate) = match standing {
            Shown::Waiting {
                position,
                queued,
                estimate,
            } => (true, position, queued, estimate),
            Shown::Admitted | Shown::Gone => (false, None, 0, WaitEstimate::Unknown),
            Shown::Closed => (true, None, 0, WaitEstimate::Unknown),
        };
        let (p25, p50, p75) = match estimate {
            WaitEstimate::Spread { p25, p50, p75 } => {
                (minutes_ceil(p25), minutes_ceil(p50), minutes_ceil(p75))
            }
            _ => (0, 0, 0),
        };
        let event = settings.event.as_ref();
        let prequeueing = event.is_some_and(|e| e.phase == Phase::Prequeue);
        let until = |at: Millis| u64::try_from((at - now).max(0)).unwrap_or(0).div_ceil(1000);
        // A place in a pre-queue means nothing until the start (a shuffled one is drawn).
        let position = position.filter(|_| !prequeueing);
        let to_start = prequeueing.then(|| until(event.map_or(now, |e| e.times.start_ms)));
        let to_end = event.map(|e| until(e.times.end_ms));
        let minutes_text = |seconds: Option<u64>| {
            seconds.map_or_else(
                || UNAVAILABLE.to_owned(),
                |seconds| wait_text(&WaitEstimate::Exact { seconds }),
            )
        };
        let refresh = if method == QueueingMethod::Reject {
            0
        } else {
            settings.refresh_interval.as_secs().max(1)
        };
        StatusBody {
            cf: CfWaitingRoom {
                in_waiting_room,
                wait_time_known: estimate.seconds().is_some(),
                wait_time: estimate.seconds().map_or(0, minutes_ceil),
                wait_time_25_percentile: p25,
                wait_time_50_percentile: p50,
                wait_time_75_percentile: p75,
                wait_time_formatted: wait_text(&estimate),
                queue_is_full: false,
                queue_all: settings.queue_all,
                last_updated: rfc3339_ms(now),
                refresh_interval_seconds: refresh,
                queueing_method: method.as_str(),
                is_fifo_queue: method == QueueingMethod::Fifo,
                is_random_queue: method == QueueingMethod::Random,
                is_passthrough_queue: method == QueueingMethod::Passthrough,
                is_reject_queue: method == QueueingMethod::Reject,
                is_event_active: event.is_some(),
                is_event_prequeueing: prequeueing,
                time_until_event_start: to_start.map_or(0, minutes_ceil),
                time_until_event_start_formatted: minutes_text(to_start),
                time_until_event_end: to_end.map_or(0, minutes_ceil),
                time_until_event_end_formatted: minutes_text(to_end),
                shuffle_at_event_start: event.is_some_and(|e| e.shuffle_at_event_start),
            },
            waitroom: WaitroomExtras {
                position,
                queued,
                admitted: matches!(standing, Shown::Admitted),
                eta_seconds: estimate.seconds(),
                queue_id: None,
                event: event.map(|e| EventExtras {
                    name: e.name.clone(),
                    phase: match e.phase {
                        Phase::Prequeue => "prequeue",
                        Phase::Running => "running",
                    },
                    starts_at: rfc3339_ms(e.times.start_ms),
                    ends_at: rfc3339_ms(e.times.end_ms),
                }),
                challenge: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_texts_read_like_cloudflare() {
        assert_eq!(wait_text(&WaitEstimate::Unknown), "unavailable");
        assert_eq!(wait_text(&WaitEstimate::Exact { seconds: 30 }), "1 minute");
        assert_eq!(
            wait_text(&WaitEstimate::Exact { seconds: 600 }),
            "10 minutes"
        );
        assert_eq!(
            wait_text(&WaitEstimate::Spread {
                p25: 300,
                p50: 600,
                p75: 900
            }),
            "5 minutes to 15 minutes"
        );
    }
}
