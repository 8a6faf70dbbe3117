//! `[notify]`: the shop's webhook, told when a visitor who gave a contact key is called.

use super::secrets::{ENV_NOTIFY_SECRET, MIN_SECRET_BYTES};
use super::{ConfigError, Environment, invalid};
use crate::config::file::NotifySection;

#[derive(Clone, PartialEq, Eq)]
pub struct NotifyConfig {
    /// http or https, with a host.
    pub webhook_url: reqwest::Url,
    /// The HMAC-SHA256 key the receiver checks each POST with.
    pub secret: String,
    /// Notifications waiting to be sent, over every room.
    pub queue_size: usize,
}

/// By hand: the secret must not show in a debug print.
impl std::fmt::Debug for NotifyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyConfig")
            .field("webhook_url", &self.webhook_url.as_str())
            .field("secret", &"****")
            .field("queue_size", &self.queue_size)
            .finish()
    }
}

/// `[notify]`: None without a `webhook_url`.
pub(crate) fn notify(
    section: &mut NotifySection,
    env: &dyn Environment,
) -> Result<Option<NotifyConfig>, ConfigError> {
    if let Some(secret) = env.var(ENV_NOTIFY_SECRET) {
        section.secret = Some(secret);
    }
    let Some(url) = &section.webhook_url else {
        return Ok(None);
    };
    let webhook_url = match reqwest::Url::parse(url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => u,
        _ => {
            return Err(invalid(
                "notify.webhook_url",
                format!("{url:?} is not an http(s) URL with a host"),
            ));
        }
    };
    let secret = match &section.secret {
        Some(secret) if secret.len() >= MIN_SECRET_BYTES => secret.clone(),
        Some(_) => {
            return Err(invalid(
                "notify.secret",
                format!("must be at least {MIN_SECRET_BYTES} bytes (or set {ENV_NOTIFY_SECRET})"),
            ));
        }
        None => {
            return Err(invalid(
                "notify.secret",
                format!(
                    "notify.webhook_url needs the key its POSTs are signed with: notify.secret \
                     or {ENV_NOTIFY_SECRET} (at least {MIN_SECRET_BYTES} bytes)"
                ),
            ));
        }
    };
    if section.queue_size == 0 {
        return Err(invalid("notify.queue_size", "must be at least 1"));
    }
    Ok(Some(NotifyConfig {
        webhook_url,
        secret,
        queue_size: section.queue_size,
    }))
}
