//! The console's sign-in sessions, kept in this process's memory only: a restart (or another
//! instance behind the same balancer) asks for the token again, which is what an operator
//! expects of a sign-in that stands for the admin token.
//!
//! A session is found by its cookie's id; the table is keyed by the id's SHA-256, so neither a
//! lookup's timing nor a look at the process's memory gives away a live cookie.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::clock::{Millis, SharedClock, millis};

/// Sessions open at once. Each needs the admin token, so this only bounds the memory of a
/// careless script signing in in a loop: the session closest to its end makes room.
const MAX_SESSIONS: usize = 64;

/// One signed-in browser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Names the session in the audit log and the log file (`console:1a2b3c4d`): random, so it
    /// says nothing of the cookie.
    pub short_id: String,
    /// Sent back by the console in `X-CSRF-Token` with every change.
    pub csrf_token: String,
    pub expires_at: Millis,
}

impl Session {
    /// The request's `X-CSRF-Token` is this session's, compared in constant time.
    pub fn csrf_matches(&self, given: &str) -> bool {
        bool::from(given.as_bytes().ct_eq(self.csrf_token.as_bytes()))
    }
}

/// A session just opened, with the id its cookie carries (known only to the browser from now).
pub struct Opened {
    pub id: String,
    pub session: Session,
}

pub struct Sessions {
    clock: SharedClock,
    lifetime: Duration,
    open: Mutex<HashMap<[u8; 32], Session>>,
}

/// 256 random bits (the thread's CSPRNG, as the token's nonces), URL-safe.
fn random_secret() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
}

fn key(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

impl Sessions {
    pub fn new(clock: SharedClock, lifetime: Duration) -> Self {
        Self {
            clock,
            lifetime,
            open: Mutex::new(HashMap::new()),
        }
    }

    pub fn lifetime(&self) -> Duration {
        self.lifetime
    }

    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new session, expiring `lifetime` from now.
    pub fn open(&self) -> Opened {
        let now = self.clock.now_ms();
        let id = random_secret();
        let session = Session {
            short_id: format!("{:08x}", rand::random::<u32>()),
            csrf_token: random_secret(),
            expires_at: now.saturating_add(millis(self.lifetime)),
        };
        let mut table = self.table();
        table.retain(|_, s| s.expires_at > now);
        if table.len() >= MAX_SESSIONS
            && let Some(soonest) = table
                .iter()
                .min_by_key(|(_, s)| s.expires_at)
                .map(|(k, _)| *k)
        {
            table.remove(&soonest);
        }
        table.insert(key(&id), session.clone());
        Opened { id, session }
    }

    /// The live session of this cookie id; an expired one is forgotten.
    pub fn find(&self, id: &str) -> Option<Session> {
        let now = self.clock.now_ms();
        let key = key(id);
        let mut table = self.table();
        match table.get(&key) {
            Some(session) if session.expires_at > now => Some(session.clone()),
            Some(_) => {
                table.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Signs out: the cookie's id no longer opens anything, here or in an open live view.
    pub fn close(&self, id: &str) -> Option<Session> {
        self.table().remove(&key(id))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;

    fn sessions(lifetime: Duration) -> (Arc<ManualClock>, Sessions) {
        let clock = ManualClock::new(1_000_000);
        (clock.clone(), Sessions::new(clock, lifetime))
    }

    #[test]
    fn a_session_lasts_its_lifetime_and_not_a_millisecond_more() {
        let (clock, sessions) = sessions(Duration::from_secs(60));
        let opened = sessions.open();
        assert_eq!(opened.session.expires_at, 1_060_000);
        clock.advance(Duration::from_millis(59_999));
        assert_eq!(sessions.find(&opened.id), Some(opened.session.clone()));
        clock.advance(Duration::from_millis(1));
        assert_eq!(sessions.find(&opened.id), None);
        // Forgotten, not only refused: the clock going back (it never does) would not revive it.
        assert!(sessions.table().is_empty());
    }

    #[test]
    fn ids_and_csrf_tokens_are_random_and_unguessable_by_each_other() {
        let (_, sessions) = sessions(Duration::from_secs(60));
        let a = sessions.open();
        let b = sessions.open();
        assert_ne!(a.id, b.id);
        assert_ne!(a.session.csrf_token, b.session.csrf_token);
        assert_ne!(a.id, a.session.csrf_token);
        assert_eq!(a.id.len(), 43, "256 bits in base64url");
        assert_eq!(sessions.find(&b.session.csrf_token), None);
        assert_eq!(sessions.find(""), None);
    }

    #[test]
    fn the_csrf_token_must_match_exactly() {
        let (_, sessions) = sessions(Duration::from_secs(60));
        let session = sessions.open().session;
        assert!(session.csrf_matches(&session.csrf_token.clone()));
        assert!(!session.csrf_matches(""));
        assert!(!session.csrf_matches(&session.csrf_token[1..]));
        assert!(!session.csrf_matches(&format!("{}x", session.csrf_token)));
    }

    #[test]
    fn sign_out_ends_only_that_session() {
        let (_, sessions) = sessions(Duration::from_secs(60));
        let a = sessions.open();
        let b = sessions.open();
        assert_eq!(
            sessions.close(&a.id).map(|s| s.short_id),
            Some(a.session.short_id)
        );
        assert_eq!(sessions.find(&a.id), None);
        assert!(sessions.find(&b.id).is_some());
        assert_eq!(sessions.close(&a.id), None);
    }

    #[test]
    fn a_full_table_gives_up_the_session_closest_to_its_end() {
        let (clock, sessions) = sessions(Duration::from_secs(3600));
        let oldest = sessions.open();
        clock.advance(Duration::from_secs(1));
        let rest: Vec<Opened> = (1..MAX_SESSIONS).map(|_| sessions.open()).collect();
        let newest = sessions.open();
        assert_eq!(sessions.table().len(), MAX_SESSIONS);
        assert_eq!(sessions.find(&oldest.id), None);
        assert!(sessions.find(&newest.id).is_some());
        assert!(rest.iter().all(|o| sessions.find(&o.id).is_some()));
    }
}
