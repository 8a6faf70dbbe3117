//! When forwarding failed: a small branded page instead of a bare error, counted by kind. A
//! visitor who went away gets nothing and is not an error.

use pingora_core::{Error, ErrorSource, ErrorType};
use pingora_proxy::{FailToProxy, Session};

use super::{RequestCtx, WaitroomProxy};
use crate::core::autopilot::Exchange;
use crate::observe::UpstreamFailure;
use crate::respond::Failure;
use crate::respond::reply::Reply;

/// `upstream_peer`'s error when no address is known for the origin's name.
pub(super) const ORIGIN_UNRESOLVED: ErrorType = ErrorType::Custom("OriginUnresolved");

pub(super) async fn answer(
    proxy: &WaitroomProxy,
    session: &mut Session,
    e: &Error,
    ctx: &mut RequestCtx,
) -> FailToProxy {
    ctx.in_flight = None;
    if body_timed_out(e) {
        return body_timeout(proxy, session, ctx).await;
    }
    if e.etype() == &ErrorType::Custom(super::forward::TUNNEL_REFUSED) {
        // Counted where it was refused; not an origin failure for the autopilot to judge.
        let code = 502;
        if let Some(responder) = proxy.counting_room(ctx).map(|f| &f.responder) {
            session.set_keepalive(None);
            let reply = responder.error_page(code, Failure::NotAnswering, accept_language(session));
            if let Err(e) = reply.send(session, false).await {
                log::debug!("could not send the error page: {e}");
            }
        }
        return FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        };
    }
    // The origin's failures are counted by kind; the visitor's own (a request that cannot be
    // read) are not the origin's.
    let (code, kind, failure) = match e.etype() {
        ErrorType::ConnectTimedout | ErrorType::ReadTimedout | ErrorType::WriteTimedout => {
            (504, Some(UpstreamFailure::Timeout), Failure::TooSlow)
        }
        ErrorType::TLSHandshakeFailure
        | ErrorType::TLSHandshakeTimedout
        | ErrorType::InvalidCert
        | ErrorType::HandshakeError => (502, Some(UpstreamFailure::Tls), Failure::NotAnswering),
        ErrorType::Custom(_) if e.etype() == &ORIGIN_UNRESOLVED => {
            (502, Some(UpstreamFailure::Resolve), Failure::NotAnswering)
        }
        ErrorType::HTTPStatus(code) => (*code, Some(UpstreamFailure::Status), Failure::Status),
        _ if e.esource() == &ErrorSource::Upstream => {
            (502, Some(UpstreamFailure::Connect), Failure::NotAnswering)
        }
        _ if super::visitor_went_away(e) => {
            // The visitor went away: nobody to answer.
            return FailToProxy {
                error_code: 0,
                can_reuse_downstream: false,
            };
        }
        _ => (400, None, Failure::BadRequest),
    };
    let room = proxy.origin_room(ctx);
    if code >= 500
        && let Some(kind) = kind
    {
        // The autopilot counts the origin's failures as errors: a timeout with the time waited.
        let waited = ctx.origin_started.map(|started| started.elapsed());
        let exchange = match (kind, waited) {
            (UpstreamFailure::Timeout, Some(after)) => Exchange::Timeout { after },
            _ => Exchange::Failed,
        };
        proxy.record_exchange(ctx, exchange);
        if let Some(front) = room {
            front.room.metrics.upstream_error(kind);
        }
    }
    // The page of the request's room, or of the first room: an error page needs some branding.
    let Some(responder) = room.or(proxy.fronts.first()).map(|f| &f.responder) else {
        return FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        };
    };
    let mut reply = responder.error_page(code, failure, accept_language(session));
    // A visitor admitted by this very request keeps the pass it was given (its place in the
    // room is already counted): without it, the next request would put it back in line while
    // its slot stays taken for a session. A pass holder's renewed pass likewise. The page is
    // `no-store`: no cache keeps the cookie.
    if let Some(cookie) = ctx.set_cookie.take() {
        reply = reply.with_header("set-cookie", cookie);
    }
    // The connection is not reused after an error: say so, or clients reuse a closed socket.
    session.set_keepalive(None);
    if let Err(e) = reply.send(session, false).await {
        log::debug!("could not send the error page: {e}");
    }
    FailToProxy {
        error_code: code,
        can_reuse_downstream: false,
    }
}

fn accept_language(session: &Session) -> Option<&str> {
    session
        .req_header()
        .headers
        .get(http::header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok())
}

/// A request body that went silent past `listen.body_timeout`: Pingora's read timeout on the
/// visitor's side (the origin's own timeouts are `Upstream`).
pub(super) fn body_timed_out(e: &Error) -> bool {
    e.etype() == &ErrorType::ReadTimedout && e.esource() != &ErrorSource::Upstream
}

/// Ends a connection whose request body stopped arriving: 408 if nothing was answered yet
/// (best effort: a trickler may not read it), counted, never reused.
async fn body_timeout(
    proxy: &WaitroomProxy,
    session: &mut Session,
    ctx: &mut RequestCtx,
) -> FailToProxy {
    if let Some(front) = proxy.counting_room(ctx) {
        front.room.metrics.body_timeouts.inc();
    }
    session.set_keepalive(None);
    if session.response_written().is_none() {
        let reply = Reply::text(408, "request body not received in time\n");
        if let Err(e) = reply.send(session, false).await {
            log::debug!("could not send the 408: {e}");
        }
    }
    FailToProxy {
        error_code: 408,
        can_reuse_downstream: false,
    }
}
