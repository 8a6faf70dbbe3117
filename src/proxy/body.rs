//! Request bodies that must keep arriving: `listen.body_timeout` bounds each silence,
//! `listen.min_body_rate` the whole body's pace. Pingora's read timeout covers the silences of
//! forwarded HTTP/1.1 bodies; the pace, and the bodies the proxy reads itself, are checked here
//! on either protocol. Both end as a `ReadTimedout` error that `failure::body_timed_out`
//! answers with a 408 and counts.

use std::time::{Duration, Instant};

use pingora_core::{Error, ErrorType};
use pingora_proxy::Session;

use crate::core::body_pace::{BodyPace, Pace};

/// Notes one piece of a body `started` at its head; too slow is the connection's end.
pub(super) fn keep_pace(
    pace: &mut BodyPace,
    bytes: usize,
    started: Instant,
) -> pingora::Result<()> {
    match pace.note(bytes, started.elapsed()) {
        Pace::Keeping => Ok(()),
        Pace::TooSlow => Err(Error::explain(
            ErrorType::ReadTimedout,
            "request body slower than listen.min_body_rate",
        )),
    }
}

/// The whole body of a request the proxy answers itself, or None when it is larger than
/// `limit`. Each piece must come within `silence` (HTTP/2 reads have no timeout of Pingora's)
/// and the body keep `pace`.
pub(super) async fn read_own_body(
    session: &mut Session,
    limit: usize,
    silence: Duration,
    mut pace: Option<&mut BodyPace>,
    started: Instant,
) -> pingora::Result<Option<Vec<u8>>> {
    let mut body = Vec::new();
    loop {
        let piece = match tokio::time::timeout(silence, session.read_request_body()).await {
            Ok(piece) => piece?,
            Err(_) => {
                return Err(Error::explain(
                    ErrorType::ReadTimedout,
                    "request body silent past listen.body_timeout",
                ));
            }
        };
        let Some(piece) = piece else {
            return Ok(Some(body));
        };
        if let Some(pace) = pace.as_deref_mut() {
            keep_pace(pace, piece.len(), started)?;
        }
        body.extend_from_slice(&piece);
        if body.len() > limit {
            return Ok(None);
        }
    }
}
