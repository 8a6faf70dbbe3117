//! `GET /admin/visitors/{queue_id}`: the visitor a queue id names, as support looks it up when a
//! visitor reads its id out. Answers what the store holds of it (place, arrival, state) and no
//! visitor id or cookie: the answer lets nobody act as the visitor.

use serde::Serialize;

use super::error;
use crate::clock::{Millis, rfc3339_ms};
use crate::core::queue_id::QueueId;
use crate::core::room::VisitorState;
use crate::respond::reply::Reply;
use crate::room::Room;

#[derive(Serialize)]
struct Found {
    queue_id: String,
    /// "waiting", "called" (its admission is held for it) or "inside" (holds a pass).
    state: &'static str,
    arrived_at: String,
    /// 1-based, while waiting.
    #[serde(skip_serializing_if = "Option::is_none")]
    position: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    queued: Option<u64>,
    /// While called: the admission is given to the next visitor after this.
    #[serde(skip_serializing_if = "Option::is_none")]
    claim_by: Option<String>,
    /// While inside: when its pass runs out unless it is used (sessions slide).
    #[serde(skip_serializing_if = "Option::is_none")]
    pass_expires_at: Option<String>,
}

pub async fn look_up(room: &Room, typed: &str) -> Reply {
    let Some(queue_id) = QueueId::parse(typed) else {
        return error(
            400,
            format!(
                "{typed:?} is not a queue id: 12 letters and digits, as the waiting page shows \
                 them (XXXX-XXXX-XXXX)"
            ),
        );
    };
    let found = match room.store.find_visitor(queue_id).await {
        Ok(found) => found,
        Err(e) => return error(503, format!("the store did not answer: {e}")),
    };
    let Some(found) = found else {
        return Reply::json(
            404,
            &serde_json::json!({
                "queue_id": queue_id.to_string(),
                "state": "gone",
                "error": "this room holds no visitor with this queue id: it left, stopped \
                          polling, never came back when called, its pass ended, or it never \
                          joined this room",
            }),
        );
    };
    let time = |at: Millis| Some(rfc3339_ms(at));
    let mut answer = Found {
        queue_id: queue_id.to_string(),
        state: "waiting",
        arrived_at: rfc3339_ms(found.arrived_at),
        position: None,
        queued: None,
        claim_by: None,
        pass_expires_at: None,
    };
    match found.state {
        VisitorState::Waiting { position, queued } => {
            answer.position = Some(position);
            answer.queued = Some(queued);
        }
        VisitorState::Called { claim_by } => {
            answer.state = "called";
            answer.claim_by = time(claim_by);
        }
        VisitorState::Inside { expires_at } => {
            answer.state = "inside";
            answer.pass_expires_at = time(expires_at);
        }
    }
    Reply::json(200, &answer)
}
