//! The sections about who may take a place and what follows when it comes: Cloudflare
//! Turnstile, the proof of work, entry tokens of members-only lines, and telling the shop
//! (`[notify]`), as the file writes them.

use serde::{Deserialize, Serialize};

use super::super::masking::masked_secret;

/// Cloudflare Turnstile on the waiting page: a challenge before a newcomer gets a place.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TurnstileSection {
    /// Cloudflare's names (turnstile_mode): off, invisible, visible_non_interactive,
    /// visible_managed.
    pub mode: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub site_key: Option<String>,
    /// Prefer the WR_TURNSTILE_SECRET variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    pub siteverify_url: String,
    pub timeout: String,
    /// Cloudflare's turnstile_action: log or infinite_queue.
    pub action: String,
    /// When siteverify cannot be reached: allow (a place anyway) or retry (the challenge again).
    pub on_unreachable: String,
}

impl Default for TurnstileSection {
    fn default() -> Self {
        Self {
            mode: "invisible".into(),
            site_key: None,
            secret: None,
            siteverify_url: "https://challenges.cloudflare.com/turnstile/v0/siteverify".into(),
            timeout: "3s".into(),
            action: "log".into(),
            on_unreachable: "allow".into(),
        }
    }
}

/// A self-hosted proof of work before a newcomer gets a place (core/proof.rs).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProofOfWorkSection {
    /// On for the room; an event's `proof_of_work` decides while it governs.
    pub enabled: bool,
    /// Leading zero bits a solution's SHA-256 needs: 2^bits hashes on average.
    pub difficulty_bits: u8,
    /// How long a seed may be answered.
    pub seed_lifetime: String,
    /// Seeds an address gets a minute at `difficulty_bits`; each doubling beyond adds a bit.
    /// 0: never rises.
    pub free_seeds_per_minute: u32,
    /// The difficulty never rises above this.
    pub max_difficulty_bits: u8,
}

/// Members-only lines: a newcomer brings a token the shop signed for a signed-in customer.
#[derive(Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct EntrySection {
    pub require_token: bool,
    /// HS256; prefer the WR_ENTRY_SECRET variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// A PEM file with the shop's public key (RS256 or EdDSA), instead of `secret`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub public_key: Option<String>,
    /// Where a newcomer without a token is sent to sign in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub login_url: Option<String>,
}

/// By hand: `secret` must not show in a debug print.
impl std::fmt::Debug for EntrySection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EntrySection")
            .field("require_token", &self.require_token)
            .field("secret", &masked_secret(self.secret.as_deref()))
            .field("public_key", &self.public_key)
            .field("login_url", &self.login_url)
            .finish()
    }
}

/// `[notify]`: a signed POST to the shop when a visitor who gave a contact key is called.
#[derive(Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct NotifySection {
    /// Left out: no webhook.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// The HMAC key; prefer the WR_NOTIFY_SECRET variable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Notifications waiting to be sent, over every room; more are dropped and counted.
    pub queue_size: usize,
}

/// Room for a burst of calls (a whole `burst` called in one tick) while the shop's receiver is slow.
pub const DEFAULT_NOTIFY_QUEUE_SIZE: usize = 10_000;

impl Default for NotifySection {
    fn default() -> Self {
        Self {
            webhook_url: None,
            secret: None,
            queue_size: DEFAULT_NOTIFY_QUEUE_SIZE,
        }
    }
}

/// By hand: `secret` must not show in a debug print.
impl std::fmt::Debug for NotifySection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifySection")
            .field("webhook_url", &self.webhook_url)
            .field("secret", &masked_secret(self.secret.as_deref()))
            .field("queue_size", &self.queue_size)
            .finish()
    }
}

/// 2^16 = 65 536 hashes on average: 0.7 s of headless Chromium's WebCrypto on the 2-core machine
/// of the measurements (about 100 000 hashes a second), 1.5 to 3 s on a phone taken as 3 to 5
/// times slower (BENCHMARKS.md, "Proof of work").
pub const DEFAULT_DIFFICULTY_BITS: u8 = 16;

impl Default for ProofOfWorkSection {
    fn default() -> Self {
        Self {
            enabled: false,
            difficulty_bits: DEFAULT_DIFFICULTY_BITS,
            seed_lifetime: "5m".into(),
            free_seeds_per_minute: 4,
            max_difficulty_bits: 24,
        }
    }
}
