//! Cloudflare Turnstile: the challenge a newcomer passes on the waiting page before it gets a
//! place in line. The widget hands its token to the page, the page posts it to
//! `/__waitroom/turnstile`, and the proxy asks siteverify itself: the secret never leaves the
//! proxy and the browser never talks to siteverify.
//!
//! A failed challenge under `action = "infinite_queue"` gets a *parked* ticket: signed like any
//! ticket, but with no store entry, so the admission loop never calls it.

use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::model::{OnUnreachable, TurnstileAction, TurnstileConfig, TurnstileMode};
use crate::request::view::Reserved;
use crate::token::Sighting;

/// What a page or an app needs to show the challenge and hand its token back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Challenge {
    /// "turnstile".
    pub provider: &'static str,
    pub site_key: String,
    /// Cloudflare's turnstile_mode name.
    pub mode: &'static str,
    /// Where the token goes: POST, form-encoded, in the field `field`.
    pub url: String,
    pub field: &'static str,
    /// The ready widget for templates (`{{{turnstile}}}`); the JSON has the parts above.
    #[serde(skip)]
    pub widget: Arc<str>,
}

/// Where the page posts the widget's token (form-encoded, field `TOKEN_FIELD`).
pub const TURNSTILE_PATH: &str = Reserved::Turnstile.path();
/// The field Turnstile itself fills in a form; the page's script sends the same name.
pub const TOKEN_FIELD: &str = "cf-turnstile-response";
pub const SCRIPT_URL: &str = "https://challenges.cloudflare.com/turnstile/v0/api.js";
/// Cloudflare documents tokens of at most 2048 characters: a longer one is not worth a call.
pub const MAX_TOKEN_LEN: usize = 2048;
/// The epoch of a parked ticket. Store epochs are 16 hex digits, so no store ever has this one,
/// and every path that compares epochs treats a parked ticket as foreign.
pub const PARKED_EPOCH: &str = "parked";
/// siteverify's answer is a small JSON object; anything bigger is not it.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// What siteverify said about one token.
#[derive(Debug)]
pub enum Verification {
    Passed,
    /// A definite no: the token is invalid, expired or already spent (`error-codes`).
    Failed {
        codes: Vec<String>,
    },
    /// No answer that decides: transport error, timeout, HTTP error, unreadable body, or
    /// Cloudflare's own `internal-error`.
    Unreachable(VerifyError),
}

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("siteverify did not answer within the timeout")]
    Timeout,
    #[error("cannot reach siteverify: {0}")]
    Transport(reqwest::Error),
    #[error("siteverify answered HTTP {0}")]
    Status(u16),
    #[error("siteverify's answer is not its JSON: {0}")]
    Body(String),
    #[error("siteverify reported an internal error")]
    Internal,
}

impl From<reqwest::Error> for VerifyError {
    fn from(e: reqwest::Error) -> Self {
        if e.is_timeout() {
            VerifyError::Timeout
        } else {
            VerifyError::Transport(e)
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("turnstile: cannot build the siteverify client: {0}")]
pub struct ClientError(#[from] reqwest::Error);

/// Why a posted body holds no token worth sending to siteverify.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("no {TOKEN_FIELD} field in the form")]
    Missing,
    #[error("the token is longer than {MAX_TOKEN_LEN} characters")]
    TooLong,
    #[error("the token holds characters no Turnstile token has")]
    NotAToken,
}

/// The token in a form-encoded body (`cf-turnstile-response=...`).
pub fn token_from_form(body: &[u8]) -> Result<String, TokenError> {
    let token = form_urlencoded::parse(body)
        .find(|(name, _)| name == TOKEN_FIELD)
        .map(|(_, value)| value.into_owned())
        .filter(|t| !t.is_empty())
        .ok_or(TokenError::Missing)?;
    if token.len() > MAX_TOKEN_LEN {
        return Err(TokenError::TooLong);
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(TokenError::NotAToken);
    }
    Ok(token)
}

#[derive(Debug, Deserialize)]
struct SiteverifyAnswer {
    success: bool,
    #[serde(rename = "error-codes", default)]
    error_codes: Vec<String>,
}

/// Reads siteverify's answer: success, a definite failure, or nothing that decides.
fn interpret(status: u16, body: &[u8]) -> Verification {
    if !(200..300).contains(&status) {
        return Verification::Unreachable(VerifyError::Status(status));
    }
    match serde_json::from_slice::<SiteverifyAnswer>(body) {
        Ok(a) if a.success => Verification::Passed,
        Ok(a) if a.error_codes.iter().any(|c| c == "internal-error") => {
            Verification::Unreachable(VerifyError::Internal)
        }
        Ok(a) => Verification::Failed {
            codes: a.error_codes,
        },
        Err(e) => Verification::Unreachable(VerifyError::Body(e.to_string())),
    }
}

/// `[turnstile]` at run time: the siteverify client and what the page and the JSON show.
pub struct Turnstile {
    client: reqwest::Client,
    url: reqwest::Url,
    secret: String,
    pub action: TurnstileAction,
    pub on_unreachable: OnUnreachable,
    site_key: String,
    mode: TurnstileMode,
}

impl Turnstile {
    pub fn new(config: &TurnstileConfig) -> Result<Self, ClientError> {
        let client = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout)
            .build()?;
        Ok(Self {
            client,
            url: config.siteverify_url.clone(),
            secret: config.secret.clone(),
            action: config.action,
            on_unreachable: config.on_unreachable,
            site_key: config.site_key.clone(),
            mode: config.mode,
        })
    }

    /// What a room's waiting page and JSON carry while the visitor has not passed: the token
    /// goes to `url` (the room's `/__waitroom/turnstile`).
    pub fn challenge(&self, url: &str) -> Challenge {
        Challenge {
            provider: "turnstile",
            site_key: self.site_key.clone(),
            mode: self.mode.as_str(),
            url: url.to_owned(),
            field: TOKEN_FIELD,
            widget: widget_html(&self.site_key, self.mode, url).into(),
        }
    }

    /// One siteverify call (POST form: secret, response, remoteip).
    pub async fn verify(&self, token: &str, remote_ip: Option<IpAddr>) -> Verification {
        let ip = remote_ip.map(|ip| ip.to_string());
        let mut form = vec![("secret", self.secret.as_str()), ("response", token)];
        if let Some(ip) = &ip {
            form.push(("remoteip", ip.as_str()));
        }
        let verification = match self.call(&form).await {
            Ok((status, body)) => interpret(status, &body),
            Err(e) => Verification::Unreachable(e),
        };
        if let Verification::Failed { codes } = &verification
            && codes.iter().any(|c| c.ends_with("-input-secret"))
        {
            // Every visitor fails alike until the operator fixes the secret: say it loudly.
            log::error!(
                "turnstile: siteverify refuses the secret ({codes:?}): check turnstile.secret"
            );
        }
        verification
    }

    async fn call(&self, form: &[(&str, &str)]) -> Result<(u16, Vec<u8>), VerifyError> {
        let mut response = self.client.post(self.url.clone()).form(form).send().await?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_ANSWER_BYTES {
                return Err(VerifyError::Body(format!(
                    "more than {MAX_ANSWER_BYTES} bytes"
                )));
            }
        }
        Ok((status, body))
    }
}

/// The widget and the script that hands its token to the proxy, for the built-in challenge page
/// and a custom template's `{{{turnstile}}}`. On success the page reloads: the proxy has set the
/// ticket (or the pass), so the reload shows the place in line (or the shop). `site_key` is
/// checked at load to be letters, digits, '-' and '_', so it needs no escaping here; `url` is a
/// reserved path with at most a room id (the same characters) in its query.
pub fn widget_html(site_key: &str, mode: TurnstileMode, url: &str) -> String {
    // The widget type (managed, non-interactive, invisible) belongs to the site key; the page
    // can only choose whether the widget takes room before it needs the visitor.
    let appearance = match mode {
        TurnstileMode::Invisible => "interaction-only",
        TurnstileMode::VisibleNonInteractive | TurnstileMode::VisibleManaged => "always",
    };
    format!(
        r##"<div class="cf-turnstile" id="wr-turnstile" data-sitekey="{site_key}" data-appearance="{appearance}" data-action="waitroom" data-callback="waitroomTurnstile"></div>
<script>
function waitroomTurnstile(token) {{
  function again() {{
    var note = document.getElementById("wr-challenge-retry");
    if (note) note.hidden = false;
    setTimeout(function () {{ if (window.turnstile) window.turnstile.reset("#wr-turnstile"); }}, 3000);
  }}
  fetch("{url}", {{
    method: "POST", credentials: "same-origin", cache: "no-store",
    headers: {{ "Content-Type": "application/x-www-form-urlencoded", Accept: "application/json" }},
    body: "{TOKEN_FIELD}=" + encodeURIComponent(token)
  }}).then(function (r) {{ if (r.ok) location.reload(); else again(); }}, again);
}}
</script>
<script src="{SCRIPT_URL}" async defer></script>"##
    )
}

/// Where a parked visitor is shown: it joined at the back and moves forward with the room's
/// admissions like a real place would, down to the front, where it stays: it is never called.
pub fn parked_position(seen: Sighting, admitted_total: u64) -> u64 {
    let admitted_since = admitted_total.saturating_sub(seen.admitted_total);
    seen.position.saturating_sub(admitted_since).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_the_token_from_the_form_and_refuses_what_is_not_one() {
        assert_eq!(
            token_from_form(b"a=1&cf-turnstile-response=XXXX.DUMMY.TOKEN.XXXX"),
            Ok("XXXX.DUMMY.TOKEN.XXXX".to_owned())
        );
        assert_eq!(
            token_from_form(b"cf-turnstile-response=a%2Bb"),
            Ok("a+b".to_owned())
        );
        assert_eq!(token_from_form(b""), Err(TokenError::Missing));
        assert_eq!(
            token_from_form(b"cf-turnstile-response="),
            Err(TokenError::Missing)
        );
        assert_eq!(token_from_form(b"token=abc"), Err(TokenError::Missing));
        let long = format!("cf-turnstile-response={}", "a".repeat(MAX_TOKEN_LEN + 1));
        assert_eq!(token_from_form(long.as_bytes()), Err(TokenError::TooLong));
        let longest = format!("cf-turnstile-response={}", "a".repeat(MAX_TOKEN_LEN));
        assert!(token_from_form(longest.as_bytes()).is_ok());
        assert_eq!(
            token_from_form(b"cf-turnstile-response=a%0Ab"),
            Err(TokenError::NotAToken)
        );
        assert_eq!(
            token_from_form(b"cf-turnstile-response=a+b"),
            Err(TokenError::NotAToken),
            "a form's + is a space"
        );
    }

    #[test]
    fn reads_siteverify_answers_as_cloudflare_documents_them() {
        assert!(matches!(
            interpret(200, br#"{"success":true,"error-codes":[],"hostname":"x"}"#),
            Verification::Passed
        ));
        match interpret(
            200,
            br#"{"success":false,"error-codes":["timeout-or-duplicate"]}"#,
        ) {
            Verification::Failed { codes } => assert_eq!(codes, ["timeout-or-duplicate"]),
            other => panic!("{other:?}"),
        }
        match interpret(200, br#"{"success":false}"#) {
            Verification::Failed { codes } => assert!(codes.is_empty()),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            interpret(
                200,
                br#"{"success":false,"error-codes":["internal-error"]}"#
            ),
            Verification::Unreachable(VerifyError::Internal)
        ));
        assert!(matches!(
            interpret(502, b"<html>bad gateway</html>"),
            Verification::Unreachable(VerifyError::Status(502))
        ));
        assert!(matches!(
            interpret(200, b"<html>not json</html>"),
            Verification::Unreachable(VerifyError::Body(_))
        ));
    }

    #[test]
    fn the_widget_carries_the_key_the_mode_and_the_way_back() {
        let html = widget_html(
            "1x00000000000000000000AA",
            TurnstileMode::Invisible,
            TURNSTILE_PATH,
        );
        assert!(html.contains(r#"data-sitekey="1x00000000000000000000AA""#));
        assert!(html.contains(r#"data-appearance="interaction-only""#));
        assert!(html.contains(SCRIPT_URL));
        assert!(html.contains(&format!("fetch(\"{TURNSTILE_PATH}\"")));
        assert!(html.contains(&format!("\"{TOKEN_FIELD}=\"")));
        let visible = widget_html(
            "k",
            TurnstileMode::VisibleManaged,
            "/__waitroom/turnstile?room=tickets",
        );
        assert!(visible.contains(r#"data-appearance="always""#));
        assert!(visible.contains(r#"fetch("/__waitroom/turnstile?room=tickets""#));
    }

    #[test]
    fn a_parked_place_moves_with_admissions_but_never_reaches_its_turn() {
        let seen = Sighting {
            position: 40,
            admitted_total: 100,
            at: 0,
        };
        assert_eq!(parked_position(seen, 100), 40);
        assert_eq!(parked_position(seen, 130), 10);
        assert_eq!(parked_position(seen, 10_000), 1);
        assert_eq!(parked_position(seen, 0), 40, "a store that lost its count");
    }
}
