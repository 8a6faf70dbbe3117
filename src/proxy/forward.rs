//! What goes to the origin and what comes back: the canonical target and Host, the forwarded
//! client address; the pass cookie on the origin's answer, kept out of shared caches, and the
//! origin's revoke command.

use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::Session;

use crate::config::model::ProtectedResponses;
use crate::core::autopilot::Outcome as Exchange;
use crate::request::client::forwarded_for;

use super::{Front, RequestCtx, WaitroomProxy};

/// The origin's header that ends the visitor's session (Cloudflare's name).
const COMMAND_HEADER: &str = "cf-waiting-room-command";

pub(super) fn rewrite(
    proxy: &WaitroomProxy,
    session: &Session,
    upstream: &mut RequestHeader,
    ctx: &mut RequestCtx,
) -> pingora::Result<()> {
    if let Some(target) = ctx.target.take() {
        let uri = http::Uri::try_from(target).map_err(|e| {
            pingora_core::Error::because(
                pingora_core::ErrorType::InvalidHTTPHeader,
                "canonical target",
                e,
            )
        })?;
        upstream.set_uri(uri);
    }
    // The configured Host wins, and only after the decision: the gate saw the visitor's.
    match (&proxy.origin.host_header, ctx.host.take()) {
        (Some(host), _) => upstream.insert_header("host", host.as_str())?,
        (None, Some(host)) => upstream.insert_header("host", host)?,
        (None, None) => {}
    }
    if let Some(peer) = session
        .client_addr()
        .and_then(|a| a.as_inet())
        .map(|a| a.ip())
    {
        let lines = upstream
            .headers
            .get_all(&X_FORWARDED_FOR)
            .iter()
            .map(|v| v.as_bytes());
        let value = forwarded_for(lines, peer);
        upstream.insert_header(X_FORWARDED_FOR, value)?;
        // A trusted proxy in front says what the visitor spoke to it; anyone else is not
        // believed.
        let told = proxy.is_trusted(peer) && upstream.headers.contains_key(&X_FORWARDED_PROTO);
        if !told {
            let proto = if proxy.tls { HTTPS } else { HTTP };
            upstream.insert_header(X_FORWARDED_PROTO, proto)?;
        }
    }
    Ok(())
}

// Names and values built once: this runs on every forwarded request, and parsing a header name
// from a string on each lookup was a measurable part of the admitted path (BENCHMARKS.md).
pub(super) const X_FORWARDED_FOR: http::HeaderName =
    http::HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: http::HeaderName = http::HeaderName::from_static("x-forwarded-proto");
const HTTPS: http::HeaderValue = http::HeaderValue::from_static("https");
const HTTP: http::HeaderValue = http::HeaderValue::from_static("http");

pub(super) async fn answer(
    proxy: &WaitroomProxy,
    session: &Session,
    response: &mut ResponseHeader,
    ctx: &mut RequestCtx,
) -> pingora::Result<()> {
    let status = response.status.as_u16();
    ctx.origin_status = Some(status);
    // The response header is here: no longer in flight at the origin.
    ctx.in_flight = None;
    let latency = ctx.origin_started.map(|started| started.elapsed());
    if let Some(front) = proxy.origin_room(ctx) {
        front.metrics.origin_response(status);
        if let Some(latency) = latency {
            front.metrics.origin_seconds.observe(latency.as_secs_f64());
        }
    }
    if let Some(latency) = latency {
        proxy.record_exchange(ctx, Exchange::Response { status, latency });
    }
    let mut cookies: Vec<String> = ctx.set_cookie.take().into_iter().collect();
    if revoke_command(response) {
        // The origin may end any pass holder's session, on a bypassed path too: the pass of
        // the request's room, or on a path no room covers, of every room the visitor holds.
        let rooms: Vec<&Front> = match ctx.room {
            Some(i) => proxy.fronts.get(i).into_iter().collect(),
            None => proxy.fronts.iter().collect(),
        };
        cookies.clear();
        for front in rooms {
            if !front.gate.settings().revoke_command_enabled {
                continue;
            }
            let holder = match ctx.room {
                Some(_) => ctx.holder.take(),
                None => None,
            }
            .or_else(|| front.gate.pass_holder(&session.req_header().headers));
            if let Some(holder) = holder {
                // A store error is noted by the gate; the cookie goes either way.
                let _ = front.gate.end_pass(&holder).await;
                cookies.push(front.responder.clearing_cookie());
            }
        }
    }
    let sets_cookie = !cookies.is_empty();
    for cookie in cookies {
        response.append_header("set-cookie", cookie)?;
    }
    // A CDN in front would otherwise hand a pass holder's page to the visitors still in line,
    // and the origin cannot tell: it sees a pass holder's request like any other.
    let protected =
        ctx.protected && proxy.origin.protected_responses == ProtectedResponses::Private;
    if sets_cookie || protected {
        keep_out_of_shared_caches(response)?;
    }
    Ok(())
}

/// Takes every command line out of the origin's answer (never shown to the visitor, whatever it
/// says) and says whether one of them revokes.
fn revoke_command(response: &mut ResponseHeader) -> bool {
    let mut revoke = false;
    for value in response.headers.get_all(COMMAND_HEADER) {
        match value.to_str() {
            Ok(v) if v.trim().eq_ignore_ascii_case("revoke") => revoke = true,
            Ok(v) => log::warn!("origin sent an unknown waiting-room command {v:?}: stripped"),
            Err(_) => log::warn!(
                "origin sent a waiting-room command that is not visible ASCII ({:?}): stripped",
                String::from_utf8_lossy(value.as_bytes())
            ),
        }
    }
    response.remove_header(COMMAND_HEADER);
    revoke
}

/// Headers that tell a CDN how long to keep a response whatever Cache-Control says (RFC 9213's
/// `CDN-Cache-Control`, Cloudflare's own, Fastly's and Akamai's): a `private` the CDN was told
/// to ignore would keep nothing out of it.
const CDN_CACHE_HEADERS: [&str; 4] = [
    "cdn-cache-control",
    "cloudflare-cdn-cache-control",
    "surrogate-control",
    "edge-control",
];

/// A response that sets a visitor's own cookie, or answers a pass holder, must never be stored
/// by a shared cache (a CDN would hand one visitor's pass or page to the next): `private`,
/// without `public` or `s-maxage`, and without the headers that override it for CDNs. A
/// response with no Cache-Control gets `private` too: shared caches may keep it heuristically.
fn keep_out_of_shared_caches(response: &mut ResponseHeader) -> pingora::Result<()> {
    for name in CDN_CACHE_HEADERS {
        response.remove_header(name);
    }
    let mut directives: Vec<String> = response
        .headers
        .get_all(http::header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .filter(|d| {
            let name = d.split('=').next().unwrap_or("").trim();
            !name.eq_ignore_ascii_case("public") && !name.eq_ignore_ascii_case("s-maxage")
        })
        .map(str::to_owned)
        .collect();
    if !directives.iter().any(|d| d.eq_ignore_ascii_case("private")) {
        directives.push("private".into());
    }
    response.insert_header(http::header::CACHE_CONTROL, directives.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(lines: &[(&str, &str)]) -> ResponseHeader {
        let mut r = ResponseHeader::build(200, None).unwrap();
        for (name, value) in lines {
            r.append_header(name.to_string(), *value).unwrap();
        }
        r
    }

    fn cache_control(r: &ResponseHeader) -> &str {
        r.headers
            .get(http::header::CACHE_CONTROL)
            .unwrap()
            .to_str()
            .unwrap()
    }

    #[test]
    fn cookies_are_kept_out_of_shared_caches() {
        let mut r = response(&[("cache-control", "public, max-age=60, s-maxage=600")]);
        keep_out_of_shared_caches(&mut r).unwrap();
        assert_eq!(cache_control(&r), "max-age=60, private");
        let mut r = response(&[]);
        keep_out_of_shared_caches(&mut r).unwrap();
        assert_eq!(cache_control(&r), "private");
        let mut r = response(&[("cache-control", "no-store"), ("cache-control", "Private")]);
        keep_out_of_shared_caches(&mut r).unwrap();
        assert_eq!(cache_control(&r), "no-store, Private");
        let mut r = response(&[
            ("cache-control", "PUBLIC, S-MaxAge=600, must-revalidate"),
            ("CDN-Cache-Control", "max-age=600"),
            ("Cloudflare-CDN-Cache-Control", "max-age=600"),
            ("Surrogate-Control", "max-age=600"),
            ("Edge-Control", "cache-maxage=600s"),
            ("x-other", "kept"),
        ]);
        keep_out_of_shared_caches(&mut r).unwrap();
        assert_eq!(cache_control(&r), "must-revalidate, private");
        for name in CDN_CACHE_HEADERS {
            assert!(r.headers.get(name).is_none(), "{name}");
        }
        assert!(r.headers.get("x-other").is_some());
    }

    #[test]
    fn every_command_line_is_stripped() {
        let mut r = response(&[(COMMAND_HEADER, "nonsense"), (COMMAND_HEADER, " REVOKE ")]);
        assert!(revoke_command(&mut r));
        assert!(r.headers.get(COMMAND_HEADER).is_none());
        let mut r = response(&[]);
        r.append_header(
            COMMAND_HEADER,
            http::HeaderValue::from_bytes(b"revoke\xff").unwrap(),
        )
        .unwrap();
        assert!(!revoke_command(&mut r));
        assert!(r.headers.get(COMMAND_HEADER).is_none());
    }
}
