//! Members-only lines (`[entry]`, src/entry.rs): a valid entry token gives its customer key's
//! one place, the same from every device; a newcomer without one is sent to sign in.

use crate::config::RoomSettings;
use crate::entry::{self, EntryVerifier};
use crate::observe::{EntryResult, Outcome};
use crate::request::view::Request;

use super::{Answer, ChallengeAnswer, Decision, Gate};

impl Gate {
    /// The request carries `wr_entry`: its key's place, and the way back to the URL without it.
    pub(super) async fn enter(
        &self,
        verifier: &EntryVerifier,
        token: &str,
        req: &Request<'_>,
        settings: &RoomSettings,
    ) -> Decision {
        let member = match verifier.key_of(token, &self.room.id) {
            Ok(member) => member,
            Err(refused) => {
                self.room.metrics.entry(refused.result());
                return Decision::Answer(Answer::EntryRefused(refused));
            }
        };
        self.room.metrics.entry(EntryResult::Entered);
        let id = self.rules.signer.member_id(&member.key);
        let then = self.member(id.clone(), req, settings).await;
        if let (Some(contact), Some(contacts)) = (&member.contact, &self.room.contacts)
            && matches!(then, Decision::Answer(Answer::Wait(_)))
        {
            contacts.note(&id, contact, self.room.clock.now_ms());
        }
        Decision::Answer(Answer::Entered {
            target: entry::without_token(req.path, req.query),
            then: Box::new(then),
        })
    }

    /// The place of the customer whose visitor id is `id`: its pass when it holds one (from
    /// another device), else its place in line (joining is idempotent: the same place), else a
    /// new one.
    async fn member(&self, id: String, req: &Request<'_>, settings: &RoomSettings) -> Decision {
        if let Some(reason) = self.room.store.revoked(&id) {
            // A key whose pass was shared away, or ended (checkout, revoke), has had its place.
            log::info!(
                "entry: key of visitor {id} refused, its pass was {}",
                reason.as_str()
            );
            return Decision::Answer(Answer::Shared);
        }
        let limits = settings.limits();
        let epoch = self.epoch().await;
        if let Ok(Some(expires_at)) = self.room.store.touch_pass(&id, &epoch, &limits).await {
            if let Some(refused) = self.in_use(&id, settings, req).await {
                return refused;
            }
            return self.with_pass(Outcome::Passed, id, epoch, expires_at);
        }
        let now = self.room.clock.now_ms();
        self.newcomer(id, None, now, settings, req, ChallengeAnswer::Member)
            .await
    }

    /// The line is for members only (`[entry]`).
    pub fn members_only(&self) -> bool {
        self.rules.entry.is_some()
    }

    /// A newcomer of a members-only line without a valid token.
    pub(super) fn entry_required(&self) -> Decision {
        self.room.metrics.entry(EntryResult::Required);
        Decision::Answer(Answer::EntryRequired)
    }
}
