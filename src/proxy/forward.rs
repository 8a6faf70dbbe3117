//! What goes to the origin and what comes back: the canonical target and Host, the forwarded
//! client address; the pass cookie on the origin's answer, kept out of shared caches, and the
//! origin's revoke command.

use pingora_http::{RequestHeader, ResponseHeader};
use pingora_proxy::Session;

use crate::config::model::ProtectedResponses;
use crate::core::autopilot::Exchange;
use crate::observe::UpgradeRefusal;
use crate::request::client::forwarded_for;

use super::{Front, RequestCtx, WaitroomProxy};

/// The origin's header that ends the visitor's session (Cloudflare's name).
const COMMAND_HEADER: http::HeaderName = http::HeaderName::from_static("cf-waiting-room-command");

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
    if !ctx.upgrade_allowed
        && strip_upgrade(upstream)?
        && let Some(front) = proxy.counting_room(ctx)
    {
        front.room.metrics.upgrade_refused(UpgradeRefusal::Request);
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

/// Takes `Upgrade` and the `upgrade` token of `Connection` off a request that may not open a
/// tunnel: a tunnel is a connection whose later requests the gate never sees (a `GET /checkout`
/// inside a WebSocket opened on a bypassed path went straight to the origin). True if there
/// was anything to take.
fn strip_upgrade(upstream: &mut RequestHeader) -> pingora::Result<bool> {
    let upgrade = upstream.headers.contains_key(http::header::UPGRADE);
    let token = upstream
        .headers
        .get_all(http::header::CONNECTION)
        .iter()
        .any(|v| connection_tokens(v.as_bytes()).any(is_upgrade_token));
    // The common request has neither: nothing allocated.
    if !upgrade && !token {
        return Ok(false);
    }
    upstream.remove_header(&http::header::UPGRADE);
    if token {
        let kept: Vec<Vec<u8>> = upstream
            .headers
            .get_all(http::header::CONNECTION)
            .iter()
            .flat_map(|v| connection_tokens(v.as_bytes()))
            .filter(|t| !is_upgrade_token(t))
            .map(<[u8]>::to_vec)
            .collect();
        upstream.remove_header(&http::header::CONNECTION);
        if !kept.is_empty() {
            upstream.insert_header(http::header::CONNECTION, kept.join(&b", "[..]))?;
        }
    }
    Ok(true)
}

fn connection_tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value
        .split(|b| *b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| !t.is_empty())
}

fn is_upgrade_token(token: &[u8]) -> bool {
    token.eq_ignore_ascii_case(b"upgrade")
}

/// What Pingora sees as a 101 it must not act on: the tunnel it would open is refused.
pub(super) const TUNNEL_REFUSED: &str = "TunnelRefused";

/// Refuses a 101 to a request that may not upgrade (its `Upgrade` was taken off, yet the origin
/// switched protocols: a broken or hostile origin, or one that upgrades on its own). The request
/// fails before Pingora turns the connection into a tunnel, so `fail_to_proxy` answers 502 and
/// closes it: nothing written after it on that connection reaches the origin.
pub(super) fn refuse_tunnel(
    proxy: &WaitroomProxy,
    response: &ResponseHeader,
    ctx: &RequestCtx,
) -> pingora::Result<()> {
    if response.status != http::StatusCode::SWITCHING_PROTOCOLS || ctx.upgrade_allowed {
        return Ok(());
    }
    if let Some(front) = proxy.counting_room(ctx) {
        front.room.metrics.upgrade_refused(UpgradeRefusal::Response);
    }
    Err(pingora_core::Error::explain(
        pingora_core::ErrorType::Custom(TUNNEL_REFUSED),
        "the origin switched protocols on a request that may not upgrade",
    )
    .into_up())
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
        front.room.metrics.origin_response(status);
        if let Some(latency) = latency {
            front
                .room
                .metrics
                .origin_seconds
                .observe(latency.as_secs_f64());
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
    // Every forwarded answer passes here; almost none carries a command.
    if !response.headers.contains_key(&COMMAND_HEADER) {
        return false;
    }
    let mut revoke = false;
    for value in response.headers.get_all(&COMMAND_HEADER) {
        match value.to_str() {
            Ok(v) if v.trim().eq_ignore_ascii_case("revoke") => revoke = true,
            Ok(v) => log::warn!("origin sent an unknown waiting-room command {v:?}: stripped"),
            Err(_) => log::warn!(
                "origin sent a waiting-room command that is not visible ASCII ({:?}): stripped",
                String::from_utf8_lossy(value.as_bytes())
            ),
        }
    }
    response.remove_header(&COMMAND_HEADER);
    revoke
}

/// Headers that tell a CDN how long to keep a response whatever Cache-Control says (RFC 9213's
/// `CDN-Cache-Control`, Cloudflare's own, Fastly's and Akamai's): a `private` the CDN was told
/// to ignore would keep nothing out of it.
/// Named once: a name given as a string is parsed again on every lookup.
const CDN_CACHE_HEADERS: [http::HeaderName; 4] = [
    http::HeaderName::from_static("cdn-cache-control"),
    http::HeaderName::from_static("cloudflare-cdn-cache-control"),
    http::HeaderName::from_static("surrogate-control"),
    http::HeaderName::from_static("edge-control"),
];

/// A response that sets a visitor's own cookie, or answers a pass holder, must never be stored
/// by a shared cache (a CDN would hand one visitor's pass or page to the next): `private`,
/// without `public` or `s-maxage`, and without the headers that override it for CDNs. A
/// response with no Cache-Control gets `private` too: shared caches may keep it heuristically.
fn keep_out_of_shared_caches(response: &mut ResponseHeader) -> pingora::Result<()> {
    // This runs on every pass holder's page: what is not there is not removed (a removal also
    // searches Pingora's map of the header names' spellings).
    for name in &CDN_CACHE_HEADERS {
        if response.headers.contains_key(name) {
            response.remove_header(name);
        }
    }
    // An origin that already says `private` in one line, without `public` or `s-maxage`, is left
    // as it is, and one that says nothing gets `private` as a constant: no allocation either way.
    if already_private(&response.headers) {
        return Ok(());
    }
    if !response.headers.contains_key(http::header::CACHE_CONTROL) {
        return response.insert_header(
            http::header::CACHE_CONTROL,
            http::HeaderValue::from_static("private"),
        );
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

/// One Cache-Control line that says `private` and neither `public` nor `s-maxage`.
fn already_private(headers: &http::HeaderMap) -> bool {
    let mut lines = headers.get_all(http::header::CACHE_CONTROL).iter();
    let (Some(line), None) = (lines.next(), lines.next()) else {
        return false;
    };
    let Ok(line) = line.to_str() else {
        return false;
    };
    let mut private = false;
    for directive in line.split(',') {
        let name = directive.split('=').next().unwrap_or("").trim();
        if name.eq_ignore_ascii_case("public") || name.eq_ignore_ascii_case("s-maxage") {
            return false;
        }
        private |= name.eq_ignore_ascii_case("private");
    }
    private
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
    fn a_private_answer_is_left_as_the_origin_wrote_it() {
        let mut r = response(&[("cache-control", "private,max-age=60")]);
        keep_out_of_shared_caches(&mut r).unwrap();
        assert_eq!(cache_control(&r), "private,max-age=60");
        let mut r = response(&[("cache-control", "private, public")]);
        keep_out_of_shared_caches(&mut r).unwrap();
        assert_eq!(cache_control(&r), "private");
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
        for name in &CDN_CACHE_HEADERS {
            assert!(r.headers.get(name).is_none(), "{name}");
        }
        assert!(r.headers.get("x-other").is_some());
    }

    fn request(lines: &[(&str, &str)]) -> RequestHeader {
        let mut r = RequestHeader::build("GET", b"/", None).unwrap();
        for (name, value) in lines {
            r.append_header(name.to_string(), *value).unwrap();
        }
        r
    }

    fn values(r: &RequestHeader, name: &str) -> Vec<String> {
        r.headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn a_request_that_may_not_upgrade_loses_its_upgrade_and_keeps_the_rest() {
        let mut r = request(&[
            ("upgrade", "websocket"),
            ("connection", "keep-alive, Upgrade"),
            ("connection", "UPGRADE"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ]);
        assert!(strip_upgrade(&mut r).unwrap());
        assert!(values(&r, "upgrade").is_empty());
        assert_eq!(values(&r, "connection"), ["keep-alive"]);
        let mut r = request(&[("upgrade", "h2c"), ("connection", "upgrade")]);
        assert!(strip_upgrade(&mut r).unwrap());
        assert!(values(&r, "connection").is_empty());
        // A plain request is left exactly as it was.
        let mut r = request(&[("connection", "keep-alive"), ("x-upgrade", "1")]);
        assert!(!strip_upgrade(&mut r).unwrap());
        assert_eq!(values(&r, "connection"), ["keep-alive"]);
        assert_eq!(values(&r, "x-upgrade"), ["1"]);
        // `upgrades` is not the token.
        let mut r = request(&[("connection", "upgrades")]);
        assert!(!strip_upgrade(&mut r).unwrap());
    }

    #[test]
    fn every_command_line_is_stripped() {
        let name = COMMAND_HEADER;
        let mut r = response(&[(name.as_str(), "nonsense"), (name.as_str(), " REVOKE ")]);
        assert!(revoke_command(&mut r));
        assert!(r.headers.get(&COMMAND_HEADER).is_none());
        let mut r = response(&[]);
        r.append_header(
            COMMAND_HEADER,
            http::HeaderValue::from_bytes(b"revoke\xff").unwrap(),
        )
        .unwrap();
        assert!(!revoke_command(&mut r));
        assert!(r.headers.get(&COMMAND_HEADER).is_none());
    }
}
