//! The proxy's own paths under `/__waitroom/`: the JSON status, the event stream, leaving the
//! line and the answer to the bot challenge. Never forwarded.

use pingora_proxy::Session;

use crate::gate::{Answered, ChallengeAnswer, ProofAnswered};
use crate::request::client::ClientAddress;
use crate::request::view::{Canonical, Request, Reserved};
use crate::respond::Responder;
use crate::respond::reply::Reply;

use super::body::read_own_body;
use super::{RequestCtx, WaitroomProxy, events};

/// Request bodies the proxy reads itself (leave, a Turnstile token) are small; more is refused.
const MAX_OWN_BODY: usize = 16 * 1024;

impl WaitroomProxy {
    pub(super) async fn own_path(
        &self,
        session: &mut Session,
        ctx: &mut RequestCtx,
        room: usize,
        reserved: Reserved,
        canonical: Canonical<'static>,
        client: Option<ClientAddress>,
    ) -> pingora::Result<()> {
        let method = session.req_header().method.clone();
        let head_only = method == http::Method::HEAD;
        let allowed = reserved.method().is_some_and(|m| {
            m == method || (m == http::Method::GET && head_only && reserved == Reserved::Status)
        });
        if !allowed {
            return Responder::not_here(reserved).send(session, head_only).await;
        }
        let body = if method == http::Method::POST {
            let read = read_own_body(
                session,
                MAX_OWN_BODY,
                self.body_timeout,
                ctx.body_pace.as_mut(),
                ctx.started,
            );
            match read.await? {
                Some(body) => body,
                None => {
                    session.set_keepalive(None);
                    return Reply::text(413, "request body too large\n")
                        .send(session, false)
                        .await;
                }
            }
        } else {
            Vec::new()
        };
        let Some(front) = self.fronts.get(room) else {
            return Responder::not_here(Reserved::Unknown)
                .send(session, head_only)
                .await;
        };
        let req = session.req_header();
        let request = Request::new(&canonical, &req.headers, client.and_then(ClientAddress::ip))
            .with_unparsed_client(client == Some(ClientAddress::Unparsed))
            .with_method(&req.method)
            .with_country_from(self.country_header.as_deref(), self.peer_trusted(session));
        // Leaving stays open to anyone: it only gives a place back.
        if reserved != Reserved::Leave
            && let Some(blocked) = front.gate.blocks_reserved(&request)
        {
            return front
                .responder
                .status(&blocked)
                .send(session, head_only)
                .await;
        }
        let reply = match reserved {
            Reserved::Status => {
                let decided = front.gate.visit(&request, ChallengeAnswer::None).await;
                front.responder.status(&decided)
            }
            // A rival's page must not be able to take a visitor out of the line.
            Reserved::Leave if request.from_another_site() => Reply::json(
                403,
                &serde_json::json!({
                    "left": false,
                    "error": "a leave comes from the room's own page, not another site's",
                }),
            ),
            Reserved::Leave => {
                let left = front.gate.leave(&request).await;
                front.responder.left(left, &front.gate.settings(), &request)
            }
            Reserved::Turnstile => match front.gate.answer_challenge(&request, &body).await {
                Answered::NoChallenge => Responder::not_here(Reserved::Unknown),
                Answered::Malformed(e) => {
                    Reply::json(400, &serde_json::json!({ "error": e.to_string() }))
                }
                Answered::TryAgain => Reply::json(
                    503,
                    &serde_json::json!({ "error": "the challenge cannot be checked now: try again" }),
                ),
                Answered::Decided(decided) => front.responder.status(&decided),
            },
            Reserved::Proof => match front.gate.answer_proof(&request, &body).await {
                ProofAnswered::Decided(decided) => front.responder.status(&decided),
                // The status JSON with a new seed, as 403: the answer did not count.
                ProofAnswered::Refused(decided) => Reply {
                    status: 403,
                    ..front.responder.status(&decided)
                },
            },
            Reserved::Events => {
                let watch = front.gate.watch(&request);
                // No address at all (not a TCP peer): one shared budget, like unreadable ones.
                let address = client.map_or_else(String::new, |c| c.limit_key(self.ipv6_prefix));
                return events::serve(session, front, &self.streams, &address, watch).await;
            }
            Reserved::Unknown => Responder::not_here(reserved),
        };
        reply.send(session, head_only).await
    }
}
