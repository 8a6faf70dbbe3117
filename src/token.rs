//! Tickets (a place in line) and passes (an admission), as HS256 JWTs bound to the room.
//! Expiry is checked against our own clock, not the system's, so tests can drive it.

use std::collections::HashMap;
use std::sync::Mutex;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::clock::Millis;
use crate::core::queue::Place;

/// Cookies longer than this are not even parsed.
pub const MAX_TOKEN_BYTES: usize = 2048;
/// Tolerated clock difference between proxy hosts when checking expiry.
const LEEWAY_MS: Millis = 1_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub id: String,
    pub place: Place,
    pub epoch: String,
    /// When the visitor first joined: its wait, and the arrival order fairness is measured
    /// against (a drawn place says nothing about arrival).
    pub arrived_at: Millis,
    /// Position when the visitor joined, for the progress bar.
    pub initial_position: u64,
    /// The last exact look-up: position, the room's admissions so far, and when. Polls in
    /// between are answered from these without asking the store.
    pub seen: Sighting,
    pub expires_at: Millis,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sighting {
    pub position: u64,
    pub admitted_total: u64,
    pub at: Millis,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    pub id: String,
    pub epoch: String,
    pub admitted_at: Millis,
    pub renewed_at: Millis,
    pub expires_at: Millis,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Ticket(Ticket),
    Pass(Pass),
}

impl Token {
    /// The visitor the token belongs to: a ticket and the pass it became share their id.
    pub fn visitor(&self) -> &str {
        match self {
            Token::Ticket(t) => &t.id,
            Token::Pass(p) => &p.id,
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    /// "ticket" or "pass".
    typ: String,
    room: String,
    sub: String,
    ep: String,
    /// Standard expiry in seconds, for tools that read the token; we check `xms`.
    exp: i64,
    xms: Millis,
    #[serde(default, skip_serializing_if = "is_zero")]
    pl: Place,
    #[serde(default, skip_serializing_if = "is_zero")]
    arr: Millis,
    #[serde(default, skip_serializing_if = "is_zero")]
    p0: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    sp: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    sa: i64,
    #[serde(default, skip_serializing_if = "is_zero")]
    st: Millis,
    #[serde(default, skip_serializing_if = "is_zero")]
    adm: Millis,
    #[serde(default, skip_serializing_if = "is_zero")]
    ren: Millis,
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

#[derive(Debug, thiserror::Error)]
#[error("token signing: {0}")]
pub struct SignError(#[from] jsonwebtoken::errors::Error);

pub struct Signer {
    room: String,
    encoding: EncodingKey,
    decoding: DecodingKey,
    validation: Validation,
    /// Passes that verified lately, by their exact text. A pass holder sends the same cookie with
    /// every page until it is renewed, and checking its signature again (base64, JSON, HMAC) was
    /// about a third of the admitted path's CPU (BENCHMARKS.md). Only tokens whose signature
    /// checked out are kept, and their expiry is checked again on every use.
    verified: Mutex<HashMap<Box<str>, Pass>>,
}

/// Passes kept verified at most (a few hundred bytes each); beyond, the cache starts over.
const VERIFIED_KEPT: usize = 4096;

impl Signer {
    pub fn new(room: &str, secret: &[u8]) -> Result<Self, SignError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.validate_exp = false;
        validation.required_spec_claims.clear();
        Ok(Self {
            room: room.to_owned(),
            encoding: EncodingKey::from_secret(secret)?,
            decoding: DecodingKey::from_secret(secret)?,
            validation,
            verified: Mutex::new(HashMap::new()),
        })
    }

    fn sign(&self, claims: &Claims) -> Result<String, SignError> {
        Ok(jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            claims,
            &self.encoding,
        )?)
    }

    pub fn sign_ticket(&self, t: &Ticket) -> Result<String, SignError> {
        self.sign(&Claims {
            typ: "ticket".into(),
            room: self.room.clone(),
            sub: t.id.clone(),
            ep: t.epoch.clone(),
            exp: t.expires_at.div_euclid(1000),
            xms: t.expires_at,
            pl: t.place,
            arr: t.arrived_at,
            p0: i64::try_from(t.initial_position).unwrap_or(i64::MAX),
            sp: i64::try_from(t.seen.position).unwrap_or(i64::MAX),
            sa: i64::try_from(t.seen.admitted_total).unwrap_or(i64::MAX),
            st: t.seen.at,
            adm: 0,
            ren: 0,
        })
    }

    pub fn sign_pass(&self, p: &Pass) -> Result<String, SignError> {
        self.sign(&Claims {
            typ: "pass".into(),
            room: self.room.clone(),
            sub: p.id.clone(),
            ep: p.epoch.clone(),
            exp: p.expires_at.div_euclid(1000),
            xms: p.expires_at,
            pl: 0,
            arr: 0,
            p0: 0,
            sp: 0,
            sa: 0,
            st: 0,
            adm: p.admitted_at,
            ren: p.renewed_at,
        })
    }

    /// The token a cookie holds, or None when it is oversized, forged, expired or for another
    /// room: all of those count as no token at all.
    pub fn verify(&self, raw: &str, now: Millis) -> Option<Token> {
        if raw.len() > MAX_TOKEN_BYTES {
            return None;
        }
        let kept = self
            .verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(raw)
            .cloned();
        if let Some(pass) = kept {
            return (pass.expires_at + LEEWAY_MS >= now).then_some(Token::Pass(pass));
        }
        let token = self.decode(raw, now)?;
        if let Token::Pass(pass) = &token {
            let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
            if verified.len() >= VERIFIED_KEPT {
                verified.clear();
            }
            verified.insert(raw.into(), pass.clone());
        }
        Some(token)
    }

    fn decode(&self, raw: &str, now: Millis) -> Option<Token> {
        let claims = jsonwebtoken::decode::<Claims>(raw, &self.decoding, &self.validation)
            .ok()?
            .claims;
        if claims.room != self.room || claims.xms + LEEWAY_MS < now || claims.sub.is_empty() {
            return None;
        }
        match claims.typ.as_str() {
            "ticket" => Some(Token::Ticket(Ticket {
                id: claims.sub,
                place: claims.pl,
                epoch: claims.ep,
                arrived_at: claims.arr,
                initial_position: u64::try_from(claims.p0).unwrap_or(0),
                seen: Sighting {
                    position: u64::try_from(claims.sp).unwrap_or(0),
                    admitted_total: u64::try_from(claims.sa).unwrap_or(0),
                    at: claims.st,
                },
                expires_at: claims.xms,
            })),
            "pass" => Some(Token::Pass(Pass {
                id: claims.sub,
                epoch: claims.ep,
                admitted_at: claims.adm,
                renewed_at: claims.ren,
                expires_at: claims.xms,
            })),
            _ => None,
        }
    }
}

/// A fresh visitor id: 128 random bits in 22 URL-safe characters (it is stored once per waiting
/// visitor in each of the store's line indexes, so its length is memory).
pub fn new_visitor_id() -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<u128>().to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass() -> Pass {
        Pass {
            id: "v1".into(),
            epoch: "e".into(),
            admitted_at: 1_000,
            renewed_at: 2_000,
            expires_at: 10_000,
        }
    }

    fn signer(room: &str, secret: &[u8]) -> Signer {
        Signer::new(room, secret).expect("valid key")
    }

    #[test]
    fn round_trips_tickets_and_passes() {
        let s = signer("room", b"0123456789abcdef0123456789abcdef");
        let t = Ticket {
            id: "v2".into(),
            place: 1_700_000_000_000_123,
            epoch: "e".into(),
            arrived_at: 1_700_000_000_000,
            initial_position: 42,
            seen: Sighting {
                position: 40,
                admitted_total: 1234,
                at: 8_000,
            },
            expires_at: 9_000,
        };
        let raw = s.sign_ticket(&t).unwrap_or_default();
        assert_eq!(s.verify(&raw, 5_000), Some(Token::Ticket(t)));
        let raw = s.sign_pass(&pass()).unwrap_or_default();
        assert_eq!(s.verify(&raw, 5_000), Some(Token::Pass(pass())));
    }

    #[test]
    fn refuses_tampered_expired_foreign_and_oversized_tokens() {
        let s = signer("room", b"0123456789abcdef0123456789abcdef");
        let raw = s.sign_pass(&pass()).unwrap_or_default();
        assert_eq!(s.verify(&raw, 11_001), None, "expired beyond the leeway");
        assert!(s.verify(&raw, 10_900).is_some(), "within the leeway");
        let other_room = signer("other", b"0123456789abcdef0123456789abcdef");
        assert_eq!(other_room.verify(&raw, 5_000), None);
        let other_key = signer("room", b"another-secret-another-secret-xx");
        assert_eq!(other_key.verify(&raw, 5_000), None);
        let mut tampered = raw.clone();
        tampered.insert(raw.len() / 2, 'x');
        assert_eq!(s.verify(&tampered, 5_000), None);
        assert_eq!(s.verify("not.a.jwt", 5_000), None);
        assert_eq!(s.verify(&"a".repeat(MAX_TOKEN_BYTES + 1), 5_000), None);
        // alg=none must never be accepted.
        let none = "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJ0eXAiOiJwYXNzIiwicm9vbSI6InJvb20iLCJzdWIiOiJ2MSIsImVwIjoiZSIsImV4cCI6MTAsInhtcyI6MTAwMDB9.";
        assert_eq!(s.verify(none, 5_000), None);
    }

    #[test]
    fn a_pass_verified_once_is_still_checked_for_expiry_and_the_cache_is_bounded() {
        let s = signer("room", b"0123456789abcdef0123456789abcdef");
        let raw = s.sign_pass(&pass()).unwrap_or_default();
        assert_eq!(s.verify(&raw, 5_000), Some(Token::Pass(pass())));
        assert_eq!(
            s.verify(&raw, 5_000),
            Some(Token::Pass(pass())),
            "from the cache"
        );
        assert_eq!(s.verify(&raw, 11_001), None, "expired, cached or not");
        let mut tampered = raw.clone();
        tampered.pop();
        assert_eq!(
            s.verify(&tampered, 5_000),
            None,
            "only its exact text is kept"
        );
        for i in 0..VERIFIED_KEPT + 10 {
            let p = Pass {
                id: format!("v{i}"),
                ..pass()
            };
            let raw = s.sign_pass(&p).unwrap_or_default();
            assert_eq!(s.verify(&raw, 5_000), Some(Token::Pass(p)));
        }
        let kept = s.verified.lock().map(|v| v.len()).unwrap_or(usize::MAX);
        assert!(kept <= VERIFIED_KEPT, "{kept}");
    }

    #[test]
    fn visitor_ids_are_unique_and_long() {
        let a = new_visitor_id();
        assert_eq!(a.len(), 22);
        assert_ne!(a, new_visitor_id());
    }
}
