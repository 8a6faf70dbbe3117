//! The operator's console on the admin listener: its pages (askama templates in `templates/`,
//! self-contained like the waiting page), its session cookie, and the checks that keep another
//! site from using a signed-in browser: the request's origin and the session's CSRF token.
//! The console's script calls the same admin API as curl does (docs/console.md).

use std::time::Duration;

use askama::Template;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::HeaderMap;

use super::sessions::Session;
use crate::request::view::cookie_in;
use crate::respond::reply::Reply;

/// The session cookie's name.
pub const COOKIE: &str = "waitroom_console";
/// The header the console's script sends the session's CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// The cookie goes back to the admin API and the console only, never to `/metrics` or probes.
const COOKIE_PATH: &str = "/admin";

/// Why a state-changing request carrying a console session is refused (403).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Forgery {
    #[error("the request comes from another origin ({0}), not this admin listener")]
    ForeignOrigin(String),
    #[error("the browser says this request is {0}; the console only accepts same-origin")]
    CrossSite(String),
    #[error("missing or wrong X-CSRF-Token: reload the console")]
    CsrfToken,
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// How the admin listener is reached: plain HTTP, or TLS with `admin.certificate`. It decides
/// the console's own origin (`http://` or `https://`) and whether its cookie is `Secure`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    fn origin(self, host: &str) -> String {
        match self {
            Scheme::Http => format!("http://{host}"),
            Scheme::Https => format!("https://{host}"),
        }
    }

    /// A browser sends a `Secure` cookie back over TLS only: set over TLS, the session never
    /// travels in clear; over plain HTTP it would never come back (but to loopback).
    fn cookie_attributes(self) -> &'static str {
        match self {
            Scheme::Http => "HttpOnly; SameSite=Strict",
            Scheme::Https => "HttpOnly; SameSite=Strict; Secure",
        }
    }
}

/// The request comes from a page of this admin listener, as far as the browser says. With an
/// `Origin`, it must be this listener's own: its scheme and the `Host` the browser sent. Without
/// one, a browser's `Sec-Fetch-Site` must not say another site sent it; `same-site` is refused
/// too, as the public listener on another port of the same host is the same site. A client
/// that sends neither (curl) is not a browser another site could drive.
pub fn same_origin(headers: &HeaderMap, scheme: Scheme) -> Result<(), Forgery> {
    if let Some(origin) = header(headers, "origin") {
        let own = header(headers, "host").map(|host| scheme.origin(host));
        return match own {
            Some(own) if own.eq_ignore_ascii_case(origin) => Ok(()),
            _ => Err(Forgery::ForeignOrigin(origin.to_owned())),
        };
    }
    match header(headers, "sec-fetch-site") {
        None | Some("same-origin" | "none") => Ok(()),
        Some(other) => Err(Forgery::CrossSite(other.to_owned())),
    }
}

/// A state-changing request of `session`: from this listener's own pages, with its CSRF token.
pub fn check_change(headers: &HeaderMap, session: &Session, scheme: Scheme) -> Result<(), Forgery> {
    same_origin(headers, scheme)?;
    match header(headers, CSRF_HEADER) {
        Some(given) if session.csrf_matches(given) => Ok(()),
        _ => Err(Forgery::CsrfToken),
    }
}

/// The session id the browser sent, if any.
pub fn session_id(headers: &HeaderMap) -> Option<&str> {
    cookie_in(headers, COOKIE).filter(|id| !id.is_empty())
}

/// The session cookie: out of reach of scripts (`HttpOnly`), never sent by a request another
/// site starts (`SameSite=Strict`), to `/admin` only, gone when the session ends, and `Secure`
/// when the admin listener speaks TLS.
pub fn session_cookie(id: &str, lifetime: Duration, scheme: Scheme) -> String {
    format!(
        "{COOKIE}={id}; Path={COOKIE_PATH}; Max-Age={}; {}",
        lifetime.as_secs(),
        scheme.cookie_attributes()
    )
}

/// Sign-out: the browser forgets the cookie.
pub fn cleared_cookie(scheme: Scheme) -> String {
    format!(
        "{COOKIE}=; Path={COOKIE_PATH}; Max-Age=0; {}",
        scheme.cookie_attributes()
    )
}

/// The admin token of the sign-in form (`token=...`, URL-encoded).
pub fn token_in_form(body: &[u8]) -> Option<String> {
    form_urlencoded::parse(body)
        .find(|(name, _)| name == "token")
        .map(|(_, value)| value.trim().to_owned())
}

#[derive(Template)]
#[template(path = "console_sign_in.html", whitespace = "minimize")]
struct SignInPage<'a> {
    nonce: &'a str,
    /// Why the last sign-in failed, shown above the form.
    problem: Option<&'a str>,
}

#[derive(Template)]
#[template(path = "console.html", whitespace = "minimize")]
struct ConsolePage<'a> {
    nonce: &'a str,
    csrf_token: &'a str,
    short_id: &'a str,
}

/// The console's pages run only their own inline script and style (a nonce per answer), fetch
/// only this listener, post forms only to it, and are never framed (no clickjacking of a
/// confirmation). The referrer policy is `same-origin`, not `no-referrer`: under `no-referrer`
/// a browser sends `Origin: null` with the page's own form posts and changes, which
/// [`same_origin`] must refuse.
fn with_page_headers(reply: Reply, nonce: &str) -> Reply {
    reply
        .with_header(
            "content-security-policy",
            format!(
                "default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; \
                 connect-src 'self'; img-src data:; form-action 'self'; base-uri 'none'; \
                 frame-ancestors 'none'"
            ),
        )
        .with_header("x-frame-options", "DENY")
        .with_header("x-content-type-options", "nosniff")
        .with_header("referrer-policy", "same-origin")
}

fn page(status: u16, template: &dyn askama::DynTemplate, nonce: &str) -> Reply {
    match template.dyn_render() {
        Ok(html) => with_page_headers(Reply::html(status, html), nonce),
        Err(e) => Reply::text(500, format!("cannot render the console: {e}\n")),
    }
}

fn nonce() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>())
}

/// The sign-in form, alone: nothing of the rooms is on it.
pub fn sign_in_page(status: u16, problem: Option<&str>) -> Reply {
    let nonce = nonce();
    page(
        status,
        &SignInPage {
            nonce: &nonce,
            problem,
        },
        &nonce,
    )
}

/// The console of a signed-in session.
pub fn console_page(session: &Session) -> Reply {
    let nonce = nonce();
    page(
        200,
        &ConsolePage {
            nonce: &nonce,
            csrf_token: &session.csrf_token,
            short_id: &session.short_id,
        },
        &nonce,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, value.parse().expect("a header value"));
        }
        map
    }

    #[test]
    fn only_this_listeners_own_origin_passes() {
        let host = ("host", "127.0.0.1:9091");
        for (scheme, own, other_scheme) in [
            (
                Scheme::Http,
                "http://127.0.0.1:9091",
                "https://127.0.0.1:9091",
            ),
            (
                Scheme::Https,
                "https://127.0.0.1:9091",
                "http://127.0.0.1:9091",
            ),
        ] {
            assert_eq!(
                same_origin(&headers(&[host, ("origin", own)]), scheme),
                Ok(())
            );
            for foreign in [
                "http://127.0.0.1:8080",
                other_scheme,
                "http://evil.example",
                "null",
            ] {
                assert_eq!(
                    same_origin(&headers(&[host, ("origin", foreign)]), scheme),
                    Err(Forgery::ForeignOrigin(foreign.to_owned())),
                    "{foreign}"
                );
            }
            assert!(same_origin(&headers(&[("origin", own)]), scheme).is_err());
        }
    }

    #[test]
    fn without_an_origin_the_fetch_site_must_not_be_another_site() {
        assert_eq!(same_origin(&headers(&[]), Scheme::Http), Ok(()));
        for fine in ["same-origin", "none"] {
            assert_eq!(
                same_origin(&headers(&[("sec-fetch-site", fine)]), Scheme::Http),
                Ok(())
            );
        }
        for refused in ["cross-site", "same-site"] {
            assert_eq!(
                same_origin(&headers(&[("sec-fetch-site", refused)]), Scheme::Https),
                Err(Forgery::CrossSite(refused.to_owned()))
            );
        }
    }

    #[test]
    fn the_cookie_is_http_only_strict_path_scoped_and_expiring() {
        assert_eq!(
            session_cookie("abc", Duration::from_secs(8 * 3600), Scheme::Http),
            "waitroom_console=abc; Path=/admin; Max-Age=28800; HttpOnly; SameSite=Strict"
        );
        assert_eq!(
            session_cookie("abc", Duration::from_secs(60), Scheme::Https),
            "waitroom_console=abc; Path=/admin; Max-Age=60; HttpOnly; SameSite=Strict; Secure"
        );
        assert!(cleared_cookie(Scheme::Http).contains("Max-Age=0"));
        assert!(cleared_cookie(Scheme::Https).ends_with("; Secure"));
        let sent = headers(&[("cookie", "other=1; waitroom_console=abc")]);
        assert_eq!(session_id(&sent), Some("abc"));
        assert_eq!(
            session_id(&headers(&[("cookie", "waitroom_console=")])),
            None
        );
    }

    #[test]
    fn the_form_gives_its_token_decoded() {
        assert_eq!(
            token_in_form(b"token=a%2Bb+c&x=1").as_deref(),
            Some("a+b c")
        );
        assert_eq!(token_in_form(b"x=1"), None);
    }

    #[test]
    fn the_sign_in_page_has_the_form_and_nothing_of_the_rooms() {
        let reply = sign_in_page(401, Some("Wrong token."));
        assert_eq!(reply.status, 401);
        let html = String::from_utf8_lossy(&reply.body);
        assert!(html.contains("action=\"/admin/console/login\""), "{html}");
        assert!(html.contains("Wrong token."));
        assert!(!html.contains("csrf"));
        let policy = reply.header("content-security-policy").unwrap_or("");
        assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
    }
}
