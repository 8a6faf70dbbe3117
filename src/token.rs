//! Tickets (a place in line) and passes (an admission), sealed with XChaCha20-Poly1305 and
//! bound to the room. Expiry is checked against our own clock, not the system's, so tests can
//! drive it.
//!
//! A cookie is `v2.` and base64url (no padding) of a random 24-byte nonce, then the sealed
//! claims in a compact binary form, then the 16-byte tag; the room's id is the associated data.
//! Nothing in it is readable: a scalper who could read a shuffled ticket's drawn place kept the
//! good draws and re-rolled the rest. The key is SHA-256 of a label and `pass.secret`, so it is
//! never the HMAC key the previous version signed with.
//!
//! Sizes for a 22-character visitor id and the store's 16-character epoch, with today's times
//! and a line of 48 000: a ticket was a 375-byte HS256 JWT and is now 157 bytes, a pass was 301
//! bytes and is now 135 (40 of them the nonce and tag; `sealed_cookies_are_less_than_half...`).
//!
//! Rolling upgrade: the HS256 JWTs the previous version issued are still honoured
//! ([`Verified::legacy`]) and the gate replaces them with a sealed cookie on the answer.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

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

/// A proof-of-work seed (`core::proof`), sealed like the cookies: its difficulty and expiry are
/// inside, so a solver can neither lower one nor stretch the other, and it is bound to the room.
/// Issued without a store write; its id is what the store spends once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seed {
    pub id: String,
    pub bits: u8,
    pub expires_at: Millis,
    /// The id was counted against the visitor's address already (a Turnstile answer whose
    /// siteverify could not be asked): the solution's place is that ticket, not a new claim.
    pub claimed: bool,
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

/// A token that verified, and in which format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub token: Token,
    /// An HS256 JWT from the previous version: honoured, but its claims are readable, so the
    /// answer must carry the same token sealed.
    pub legacy: bool,
}

/// What a sealed cookie starts with; the JWTs of the previous version start with `eyJ`.
const SEALED_PREFIX: &str = "v2.";
/// Separates the cookie key from any other use of `pass.secret` (the previous version's HMAC
/// key was the secret itself).
const KEY_LABEL: &[u8] = b"waitroom cookie key v2\0";
/// Binds a sealed token to its format and room: another room's token fails its tag.
const AAD_LABEL: &[u8] = b"waitroom cookie v2\0";
const NONCE_BYTES: usize = 24;
const TAG_BYTES: usize = 16;
/// Labels the key `member_id` hashes with, apart from the cookies' key.
const MEMBER_KEY_LABEL: &[u8] = b"waitroom member id v1\0";
const KIND_TICKET: u8 = 1;
const KIND_PASS: u8 = 2;
const KIND_SEED: u8 = 3;

/// The previous version's claims, kept to read its HS256 tokens during a rolling upgrade.
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
pub enum SignError {
    #[error("token key: {0}")]
    Key(#[from] jsonwebtoken::errors::Error),
    #[error("token sealing failed")]
    Seal,
}

pub struct Signer {
    /// The associated data of every sealed token: a label and the room's id.
    aad: Vec<u8>,
    /// Keys the visitor id of a members-only line's customer (`member_id`).
    member_key: [u8; 32],
    cipher: XChaCha20Poly1305,
    room: String,
    legacy: DecodingKey,
    validation: Validation,
    /// Passes that verified lately, by their exact text, and whether they were legacy. A pass
    /// holder sends the same cookie with every page until it is renewed, and checking it again
    /// (base64, then the tag or the HMAC) was about a third of the admitted path's CPU
    /// (BENCHMARKS.md). Only tokens that checked out are kept, and their expiry is checked
    /// again on every use.
    verified: Mutex<HashMap<Box<str>, (Pass, bool)>>,
}

/// Passes kept verified at most (a few hundred bytes each); beyond, the cache starts over.
const VERIFIED_KEPT: usize = 4096;

impl Signer {
    pub fn new(room: &str, secret: &[u8]) -> Result<Self, SignError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.validate_exp = false;
        validation.required_spec_claims.clear();
        let key: [u8; 32] = Sha256::new()
            .chain_update(KEY_LABEL)
            .chain_update(secret)
            .finalize()
            .into();
        let member_key: [u8; 32] = Sha256::new()
            .chain_update(MEMBER_KEY_LABEL)
            .chain_update(secret)
            .finalize()
            .into();
        Ok(Self {
            member_key,
            aad: [AAD_LABEL, room.as_bytes()].concat(),
            cipher: XChaCha20Poly1305::new(&key.into()),
            room: room.to_owned(),
            legacy: DecodingKey::from_secret(secret)?,
            validation,
            verified: Mutex::new(HashMap::new()),
        })
    }

    fn seal(&self, claims: &[u8]) -> Result<String, SignError> {
        let nonce: [u8; NONCE_BYTES] = rand::random();
        let nonce = XNonce::from(nonce);
        let sealed = self
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: claims,
                    aad: &self.aad,
                },
            )
            .map_err(|_| SignError::Seal)?;
        let mut out = String::with_capacity(
            SEALED_PREFIX.len() + (NONCE_BYTES + sealed.len()).div_ceil(3) * 4,
        );
        out.push_str(SEALED_PREFIX);
        URL_SAFE_NO_PAD.encode_string([nonce.as_slice(), &sealed].concat(), &mut out);
        Ok(out)
    }

    fn open(&self, raw: &str) -> Option<Vec<u8>> {
        let bytes = URL_SAFE_NO_PAD
            .decode(raw.strip_prefix(SEALED_PREFIX)?)
            .ok()?;
        if bytes.len() < NONCE_BYTES + TAG_BYTES {
            return None;
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let nonce = XNonce::try_from(nonce).ok()?;
        self.cipher
            .decrypt(
                &nonce,
                Payload {
                    msg: sealed,
                    aad: &self.aad,
                },
            )
            .ok()
    }

    pub fn sign_ticket(&self, t: &Ticket) -> Result<String, SignError> {
        let mut w = Writer::new(KIND_TICKET, &t.id, &t.epoch, t.expires_at);
        w.int(t.place);
        w.int(t.arrived_at);
        w.uint(t.initial_position);
        w.uint(t.seen.position);
        w.uint(t.seen.admitted_total);
        w.int(t.seen.at);
        self.seal(&w.0)
    }

    pub fn sign_pass(&self, p: &Pass) -> Result<String, SignError> {
        let mut w = Writer::new(KIND_PASS, &p.id, &p.epoch, p.expires_at);
        w.int(p.admitted_at);
        w.int(p.renewed_at);
        self.seal(&w.0)
    }

    /// The visitor id of the customer `key` in a members-only line: the same for every device
    /// and instance (so the key holds one place), unguessable without the secret, and telling
    /// nothing of the key.
    pub fn member_id(&self, key: &str) -> String {
        let digest: [u8; 32] = Sha256::new()
            .chain_update(self.member_key)
            .chain_update(&self.aad)
            .chain_update(key.as_bytes())
            .finalize()
            .into();
        URL_SAFE_NO_PAD.encode(&digest[..16])
    }

    pub fn seal_seed(&self, seed: &Seed) -> Result<String, SignError> {
        let mut w = Writer::new(KIND_SEED, &seed.id, "", seed.expires_at);
        w.uint(u64::from(seed.bits));
        w.uint(u64::from(seed.claimed));
        self.seal(&w.0)
    }

    /// The seed `raw` is, or None when it is oversized, forged, for another room, not a seed or
    /// expired at `now` (no leeway: the proxy that checks an answer may not be the one that
    /// issued the seed, but a seed lives minutes, not the second clocks may differ by).
    pub fn open_seed(&self, raw: &str, now: Millis) -> Option<Seed> {
        if raw.len() > MAX_TOKEN_BYTES {
            return None;
        }
        let claims = self.open(raw)?;
        let mut r = Reader(&claims);
        if r.byte()? != KIND_SEED {
            return None;
        }
        let id = r.text()?;
        r.text()?;
        let expires_at = r.int()?;
        let bits = u8::try_from(r.uint()?).ok()?;
        let claimed = match r.uint()? {
            0 => false,
            1 => true,
            _ => return None,
        };
        let fresh = !id.is_empty() && r.0.is_empty() && expires_at >= now;
        fresh.then_some(Seed {
            id,
            bits,
            expires_at,
            claimed,
        })
    }

    /// The token a cookie holds, or None when it is oversized, forged, expired or for another
    /// room: all of those count as no token at all.
    pub fn verify(&self, raw: &str, now: Millis) -> Option<Token> {
        self.check(raw, now).map(|v| v.token)
    }

    /// [`Signer::verify`], saying whether the token is a legacy HS256 JWT to replace.
    pub fn check(&self, raw: &str, now: Millis) -> Option<Verified> {
        if raw.len() > MAX_TOKEN_BYTES {
            return None;
        }
        let kept = self
            .verified
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(raw)
            .cloned();
        if let Some((pass, legacy)) = kept {
            return (pass.expires_at.saturating_add(LEEWAY_MS) >= now).then_some(Verified {
                token: Token::Pass(pass),
                legacy,
            });
        }
        let legacy = !raw.starts_with(SEALED_PREFIX);
        let token = if legacy {
            self.decode_legacy(raw)?
        } else {
            decode_sealed(&self.open(raw)?)?
        };
        let (id, expires_at) = match &token {
            Token::Ticket(t) => (&t.id, t.expires_at),
            Token::Pass(p) => (&p.id, p.expires_at),
        };
        if id.is_empty() || expires_at.saturating_add(LEEWAY_MS) < now {
            return None;
        }
        if let Token::Pass(pass) = &token {
            let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
            if verified.len() >= VERIFIED_KEPT {
                verified.clear();
            }
            verified.insert(raw.into(), (pass.clone(), legacy));
        }
        Some(Verified { token, legacy })
    }

    fn decode_legacy(&self, raw: &str) -> Option<Token> {
        let claims = jsonwebtoken::decode::<Claims>(raw, &self.legacy, &self.validation)
            .ok()?
            .claims;
        if claims.room != self.room {
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

/// The sealed claims: a kind byte, the id and epoch (each a length then UTF-8), then integers
/// as LEB128 varints (signed ones zigzagged): small, and no field names to give away.
struct Writer(Vec<u8>);

impl Writer {
    fn new(kind: u8, id: &str, epoch: &str, expires_at: Millis) -> Self {
        let mut w = Self(Vec::with_capacity(96));
        w.0.push(kind);
        w.text(id);
        w.text(epoch);
        w.int(expires_at);
        w
    }

    fn uint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn int(&mut self, v: i64) {
        self.uint(((v << 1) ^ (v >> 63)) as u64);
    }

    fn text(&mut self, s: &str) {
        self.uint(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn uint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            // The tenth byte may carry only the top bit.
            if shift == 63 && bits > 1 {
                return None;
            }
            v |= bits << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    fn int(&mut self) -> Option<i64> {
        let v = self.uint()?;
        Some(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn text(&mut self) -> Option<String> {
        let len = usize::try_from(self.uint()?).ok()?;
        if len > self.0.len() {
            return None;
        }
        let (text, rest) = self.0.split_at(len);
        self.0 = rest;
        String::from_utf8(text.to_vec()).ok()
    }
}

fn decode_sealed(claims: &[u8]) -> Option<Token> {
    let mut r = Reader(claims);
    let kind = r.byte()?;
    let id = r.text()?;
    let epoch = r.text()?;
    let expires_at = r.int()?;
    let token = match kind {
        KIND_TICKET => Token::Ticket(Ticket {
            id,
            epoch,
            expires_at,
            place: r.int()?,
            arrived_at: r.int()?,
            initial_position: r.uint()?,
            seen: Sighting {
                position: r.uint()?,
                admitted_total: r.uint()?,
                at: r.int()?,
            },
        }),
        KIND_PASS => Token::Pass(Pass {
            id,
            epoch,
            expires_at,
            admitted_at: r.int()?,
            renewed_at: r.int()?,
        }),
        _ => return None,
    };
    r.0.is_empty().then_some(token)
}

/// A fresh visitor id: 128 random bits in 22 URL-safe characters (it is stored once per waiting
/// visitor in each of the store's line indexes, so its length is memory).
pub fn new_visitor_id() -> String {
    URL_SAFE_NO_PAD.encode(rand::random::<u128>().to_le_bytes())
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
    fn seeds_open_in_their_room_until_they_expire_and_are_no_cookie() {
        let s = signer("room", b"0123456789abcdef0123456789abcdef");
        let seed = Seed {
            id: new_visitor_id(),
            bits: 18,
            expires_at: 10_000,
            claimed: true,
        };
        let raw = s.seal_seed(&seed).unwrap_or_default();
        assert!(raw.len() < 120, "{} bytes", raw.len());
        assert_eq!(s.open_seed(&raw, 10_000), Some(seed.clone()));
        assert_eq!(s.open_seed(&raw, 10_001), None, "expired");
        let other = signer("other-room", b"0123456789abcdef0123456789abcdef");
        assert_eq!(other.open_seed(&raw, 0), None, "another room");
        assert_eq!(s.verify(&raw, 0), None, "a seed is no ticket");
        let pass = s.sign_pass(&pass()).unwrap_or_default();
        assert_eq!(s.open_seed(&pass, 0), None, "a pass is no seed");
        let mut forged = raw.clone().into_bytes();
        let last = forged.len() - 2;
        forged[last] = if forged[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(s.open_seed(&String::from_utf8(forged).unwrap(), 0), None);
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
        assert_eq!(s.verify("v2.", 5_000), None);
        assert_eq!(s.verify(&raw[..raw.len() - 1], 5_000), None, "truncated");
        assert_eq!(s.verify(&raw[..40], 5_000), None, "truncated");
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

    fn ticket() -> Ticket {
        Ticket {
            id: new_visitor_id(),
            place: 1_764_680_000_000_123,
            epoch: "k3J9xQ2mZ8pL4wRt".into(),
            arrived_at: 1_764_680_000_000,
            initial_position: 48_213,
            seen: Sighting {
                position: 40_007,
                admitted_total: 8_206,
                at: 1_764_680_100_000,
            },
            expires_at: 1_764_680_400_000,
        }
    }

    fn real_pass() -> Pass {
        Pass {
            id: new_visitor_id(),
            epoch: "k3J9xQ2mZ8pL4wRt".into(),
            admitted_at: 1_764_680_100_000,
            renewed_at: 1_764_680_200_000,
            expires_at: 1_764_680_900_000,
        }
    }

    const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef";

    /// What the previous version issued: an HS256 JWT over the readable claims.
    fn legacy(room: &str, token: &Token) -> String {
        let claims = match token {
            Token::Ticket(t) => Claims {
                typ: "ticket".into(),
                room: room.into(),
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
            },
            Token::Pass(p) => Claims {
                typ: "pass".into(),
                room: room.into(),
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
            },
        };
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(Algorithm::HS256),
            &claims,
            &jsonwebtoken::EncodingKey::from_secret(SECRET).expect("key"),
        )
        .expect("signed")
    }

    fn body(raw: &str) -> Vec<u8> {
        let text = raw.strip_prefix(SEALED_PREFIX).expect("sealed");
        URL_SAFE_NO_PAD.decode(text).expect("base64url")
    }

    fn contains(haystack: &[u8], needle: &[u8]) -> bool {
        haystack.windows(needle.len()).any(|w| w == needle)
    }

    #[test]
    fn sealed_tokens_tell_nothing_in_clear() {
        let s = signer("drop-room", SECRET);
        let t = ticket();
        let raw = s.sign_ticket(&t).expect("sealed");
        let bytes = body(&raw);
        for secret in [
            t.id.as_bytes(),
            t.epoch.as_bytes(),
            b"drop-room",
            b"ticket",
            t.place.to_string().as_bytes(),
            &t.place.to_le_bytes()[..6],
            &t.place.to_be_bytes()[2..],
        ] {
            assert!(!contains(&bytes, secret), "{secret:?} in the clear");
            assert!(
                !contains(raw.as_bytes(), secret),
                "{secret:?} in the cookie"
            );
        }
        // The visitor id decoded from its base64 is not there either.
        let id_bytes = URL_SAFE_NO_PAD.decode(&t.id).expect("id");
        assert!(!contains(&bytes, &id_bytes));
        let p = real_pass();
        let raw = s.sign_pass(&p).expect("sealed");
        assert!(!contains(&body(&raw), p.id.as_bytes()));
        assert!(!contains(raw.as_bytes(), p.id.as_bytes()));
        // A random nonce: the same ticket twice makes two unrelated cookies.
        assert_ne!(s.sign_ticket(&t).ok(), s.sign_ticket(&t).ok());
    }

    #[test]
    fn any_changed_byte_or_character_is_refused() {
        let s = signer("room", SECRET);
        let t = ticket();
        let now = t.seen.at;
        for raw in [
            s.sign_ticket(&t).expect("sealed"),
            s.sign_pass(&real_pass()).expect("sealed"),
        ] {
            assert!(s.verify(&raw, now).is_some());
            let bytes = body(&raw);
            for i in 0..bytes.len() {
                let mut changed = bytes.clone();
                changed[i] ^= 0x01;
                let forged = format!("{SEALED_PREFIX}{}", URL_SAFE_NO_PAD.encode(&changed));
                assert_eq!(s.verify(&forged, now), None, "byte {i}");
            }
            for (i, c) in raw.char_indices() {
                let other = if c == 'A' { 'B' } else { 'A' };
                let mut forged = raw.clone();
                forged.replace_range(i..i + 1, &other.to_string());
                assert_eq!(s.verify(&forged, now), None, "character {i}");
            }
        }
    }

    #[test]
    fn sealed_tokens_are_bound_to_their_room_and_key() {
        let t = ticket();
        let now = t.seen.at;
        let raw = signer("room", SECRET).sign_ticket(&t).expect("sealed");
        assert!(signer("room", SECRET).verify(&raw, now).is_some());
        assert_eq!(signer("room2", SECRET).verify(&raw, now), None);
        assert_eq!(signer("roo", SECRET).verify(&raw, now), None);
        assert_eq!(
            signer("room", b"another-secret-another-secret-xx").verify(&raw, now),
            None
        );
        // A ticket is not a pass: the kind is sealed too.
        let s = signer("room", SECRET);
        assert!(matches!(s.verify(&raw, now), Some(Token::Ticket(_))));
    }

    #[test]
    fn legacy_jwts_are_still_honoured_and_flagged() {
        let s = signer("room", SECRET);
        let t = ticket();
        let now = t.seen.at;
        let raw = legacy("room", &Token::Ticket(t.clone()));
        assert!(raw.starts_with("eyJ"));
        assert_eq!(
            s.check(&raw, now),
            Some(Verified {
                token: Token::Ticket(t.clone()),
                legacy: true
            })
        );
        let p = real_pass();
        let raw = legacy("room", &Token::Pass(p.clone()));
        let expected = Some(Verified {
            token: Token::Pass(p.clone()),
            legacy: true,
        });
        assert_eq!(s.check(&raw, now), expected);
        assert_eq!(
            s.check(&raw, now),
            expected,
            "from the cache, still flagged"
        );
        assert_eq!(s.check(&raw, p.expires_at + LEEWAY_MS + 1), None, "expired");
        assert_eq!(signer("other", SECRET).check(&raw, now), None, "other room");
        assert_eq!(
            signer("room", b"another-secret-another-secret-xx").check(&raw, now),
            None
        );
        // What replaces them is sealed and not flagged.
        let sealed = s.sign_pass(&p).expect("sealed");
        assert_eq!(
            s.check(&sealed, now),
            Some(Verified {
                token: Token::Pass(p),
                legacy: false
            })
        );
        let sealed = s.sign_ticket(&t).expect("sealed");
        assert_eq!(s.check(&sealed, now).map(|v| v.legacy), Some(false));
    }

    #[test]
    fn sealed_cookies_are_less_than_half_the_jwts() {
        let s = signer("drop-room", SECRET);
        let t = ticket();
        let p = real_pass();
        let sealed_ticket = s.sign_ticket(&t).expect("sealed").len();
        let sealed_pass = s.sign_pass(&p).expect("sealed").len();
        let jwt_ticket = legacy("drop-room", &Token::Ticket(t)).len();
        let jwt_pass = legacy("drop-room", &Token::Pass(p)).len();
        // The sizes the module's documentation states.
        assert_eq!((jwt_ticket, sealed_ticket), (375, 157));
        assert_eq!((jwt_pass, sealed_pass), (301, 135));
        // Whatever the fields hold, a cookie stays far below the size we parse.
        let huge = Ticket {
            place: i64::MIN,
            arrived_at: i64::MAX,
            initial_position: u64::MAX,
            seen: Sighting {
                position: u64::MAX,
                admitted_total: u64::MAX,
                at: i64::MIN,
            },
            expires_at: i64::MAX,
            ..ticket()
        };
        let raw = s.sign_ticket(&huge).expect("sealed");
        assert!(raw.len() < 256, "{}", raw.len());
        assert_eq!(s.verify(&raw, 0), Some(Token::Ticket(huge)));
    }

    #[test]
    fn varints_round_trip_at_the_edges() {
        for v in [
            0,
            1,
            -1,
            63,
            -64,
            64,
            i64::MAX,
            i64::MIN,
            1_764_680_000_000_123,
        ] {
            let mut w = Writer(Vec::new());
            w.int(v);
            let mut r = Reader(&w.0);
            assert_eq!(r.int(), Some(v));
            assert!(r.0.is_empty());
        }
        for v in [0, 127, 128, u64::MAX] {
            let mut w = Writer(Vec::new());
            w.uint(v);
            assert_eq!(Reader(&w.0).uint(), Some(v));
        }
        // Eleven bytes, or a tenth byte over the top bit, is no number.
        assert_eq!(Reader(&[0xff; 11]).uint(), None);
        assert_eq!(
            Reader(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02]).uint(),
            None
        );
        assert_eq!(Reader(&[0x80]).uint(), None);
    }

    #[test]
    fn visitor_ids_are_unique_and_long() {
        let a = new_visitor_id();
        assert_eq!(a.len(), 22);
        assert_ne!(a, new_visitor_id());
    }
}
