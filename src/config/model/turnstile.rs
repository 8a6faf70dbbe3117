//! `[turnstile]`: Cloudflare Turnstile on the waiting page, a challenge before a newcomer gets a
//! place in line.

use std::time::Duration;

use super::secrets::ENV_TURNSTILE_SECRET;
use super::values::{choice, duration};
use super::{ConfigError, Environment, invalid};
use crate::config::file::TurnstileSection;

/// How the widget shows on the waiting page (Cloudflare's turnstile_mode, "off" aside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnstileMode {
    Invisible,
    VisibleNonInteractive,
    VisibleManaged,
}

impl TurnstileMode {
    pub fn as_str(self) -> &'static str {
        match self {
            TurnstileMode::Invisible => "invisible",
            TurnstileMode::VisibleNonInteractive => "visible_non_interactive",
            TurnstileMode::VisibleManaged => "visible_managed",
        }
    }
}

/// What a failed challenge leads to (Cloudflare's turnstile_action).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnstileAction {
    /// Counted, then treated as passed.
    Log,
    /// A place in a line that never admits (no store entry), looking like a real one.
    InfiniteQueue,
}

/// What a challenge answer leads to while siteverify cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnUnreachable {
    /// A place in line anyway: an outage of Cloudflare does not stop humans from queueing.
    Allow,
    /// The challenge again: nobody gets a place unverified.
    Retry,
    /// A proof of work instead (`[proof_of_work]`'s difficulty): a place costs something even
    /// while Cloudflare cannot be asked.
    ProofOfWork,
}

#[derive(Debug, Clone)]
pub struct TurnstileConfig {
    pub mode: TurnstileMode,
    pub site_key: String,
    pub secret: String,
    pub siteverify_url: reqwest::Url,
    pub timeout: Duration,
    pub action: TurnstileAction,
    pub on_unreachable: OnUnreachable,
}

/// Cloudflare's published test secrets, which answer the same for every token.
const TEST_SECRETS: [(&str, &str); 3] = [
    (
        "1x0000000000000000000000000000000AA",
        "every challenge passes",
    ),
    (
        "2x0000000000000000000000000000000AA",
        "every challenge fails",
    ),
    (
        "3x0000000000000000000000000000000AA",
        "every token is reported as already spent",
    ),
];

/// `[turnstile]`: None when the section is left out or `mode = "off"`.
pub(crate) fn turnstile(
    section: &mut Option<TurnstileSection>,
    env: &dyn Environment,
    warnings: &mut Vec<String>,
) -> Result<Option<TurnstileConfig>, ConfigError> {
    let Some(t) = section else {
        return Ok(None);
    };
    let mode = choice(
        "turnstile.mode",
        &t.mode,
        &[
            ("off", None),
            ("invisible", Some(TurnstileMode::Invisible)),
            (
                "visible_non_interactive",
                Some(TurnstileMode::VisibleNonInteractive),
            ),
            ("visible_managed", Some(TurnstileMode::VisibleManaged)),
        ],
    )?;
    let action = choice(
        "turnstile.action",
        &t.action,
        &[
            ("log", TurnstileAction::Log),
            ("infinite_queue", TurnstileAction::InfiniteQueue),
        ],
    )?;
    let on_unreachable = choice(
        "turnstile.on_unreachable",
        &t.on_unreachable,
        &[
            ("allow", OnUnreachable::Allow),
            ("retry", OnUnreachable::Retry),
            ("proof_of_work", OnUnreachable::ProofOfWork),
        ],
    )?;
    let timeout = duration("turnstile.timeout", &t.timeout)?;
    let siteverify_url = reqwest::Url::parse(&t.siteverify_url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
        .ok_or_else(|| {
            invalid(
                "turnstile.siteverify_url",
                format!("{:?} is not an http:// or https:// URL", t.siteverify_url),
            )
        })?;
    let Some(mode) = mode else {
        return Ok(None);
    };
    if let Some(value) = env.var(ENV_TURNSTILE_SECRET) {
        t.secret = Some(value);
    }
    let secret = match &t.secret {
        Some(s) if !s.trim().is_empty() => s.trim().to_owned(),
        _ => {
            return Err(invalid(
                "turnstile.secret",
                format!("is required with a turnstile mode: set it or {ENV_TURNSTILE_SECRET}"),
            ));
        }
    };
    // The site key is written into the page's HTML (also raw, in `{{{turnstile}}}`): only the
    // characters Cloudflare's keys are made of may pass.
    let site_key = match &t.site_key {
        Some(k)
            if !k.is_empty()
                && k.len() <= 100
                && k.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b)) =>
        {
            k.clone()
        }
        Some(k) => {
            return Err(invalid(
                "turnstile.site_key",
                format!("{k:?} is not a site key (letters, digits, '-' and '_')"),
            ));
        }
        None => {
            return Err(invalid(
                "turnstile.site_key",
                "is required with a turnstile mode",
            ));
        }
    };
    if let Some((_, effect)) = TEST_SECRETS.iter().find(|(s, _)| *s == secret) {
        warnings.push(format!(
            "turnstile.secret is one of Cloudflare's test secrets: {effect}"
        ));
    }
    let loopback = siteverify_url.host_str().is_some_and(|h| {
        h == "localhost"
            || h.trim_matches(['[', ']'])
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    });
    // What the defaults give away, said where an operator checks the file: both fail open.
    if action == TurnstileAction::Log {
        warnings.push(
            "turnstile.action = \"log\": a visitor whose challenge fails still gets a place \
             (counted in waitroom_turnstile_verifications_total{outcome=\"failed\"}); \
             \"infinite_queue\" parks it instead"
                .into(),
        );
    }
    if on_unreachable == OnUnreachable::Allow {
        warnings.push(
            "turnstile.on_unreachable = \"allow\": while siteverify cannot be reached, every \
             newcomer gets a place unverified; \"proof_of_work\" asks for a proof of work \
             instead, \"retry\" lets nobody in"
                .into(),
        );
    }
    if siteverify_url.scheme() == "http" && !loopback {
        warnings
            .push("turnstile.siteverify_url is plain http: the secret travels unencrypted".into());
    }
    Ok(Some(TurnstileConfig {
        mode,
        site_key,
        secret,
        siteverify_url,
        timeout,
        action,
        on_unreachable,
    }))
}
