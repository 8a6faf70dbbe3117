//! Entry tokens (`[entry]`): a members-only line. The shop signs a short-lived token for a
//! signed-in customer (claims `key`, the customer id, and `exp`, both required; `room`
//! optional, the room's id when present; `contact` optional, the shop's own key for reaching the
//! person, passed to the `[notify]` webhook when the customer is called), and sends the customer to any protected URL with it as
//! the query parameter `wr_entry`. The proxy checks it, gives the customer's key its one place
//! (the same place from any device or address), and redirects to the same URL without it, so
//! the token never reaches the origin nor stays in the address bar.

use std::borrow::Cow;

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::config::model::{EntryConfig, EntryKey};
use crate::observe::EntryResult;

/// The query parameter an entry token comes in.
pub const ENTRY_PARAM: &str = "wr_entry";
/// Tokens longer than this are not parsed.
const MAX_TOKEN_LEN: usize = 4096;
/// Clocks of the shop and the proxy may differ by this much.
const LEEWAY_SECS: u64 = 5;

#[derive(Debug, Serialize, Deserialize)]
struct Claims {
    key: String,
    exp: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    room: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    contact: Option<String>,
}

/// What a valid entry token says of its customer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub key: String,
    /// Opaque to the proxy, at most `MAX_CONTACT_BYTES`; None when absent or blank.
    pub contact: Option<String>,
}

/// Why an entry token was refused, as the JSON's `reason` and the metric's `result` say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryRefusal {
    /// Not signed with the shop's key, not a token, or without a key.
    Forged,
    Expired,
    /// Signed for another room.
    OtherRoom,
}

/// A contact longer than this makes the token forged: the shop's key for a person, not a letter.
pub const MAX_CONTACT_BYTES: usize = 256;

impl EntryRefusal {
    /// What `waitroom_entries_total` counts it as.
    pub fn result(self) -> EntryResult {
        match self {
            EntryRefusal::Forged => EntryResult::Forged,
            EntryRefusal::Expired => EntryResult::Expired,
            EntryRefusal::OtherRoom => EntryResult::OtherRoom,
        }
    }

    pub fn label(self) -> &'static str {
        self.result().label()
    }
}

/// Checks entry tokens with the shop's key.
pub struct EntryVerifier {
    key: DecodingKey,
    validation: Validation,
    /// Where a newcomer without a token is sent.
    pub login_url: Option<String>,
}

impl EntryVerifier {
    pub fn new(config: &EntryConfig) -> Result<Self, jsonwebtoken::errors::Error> {
        let (key, algorithm) = match &config.key {
            EntryKey::Secret(secret) => (
                DecodingKey::from_secret(secret.as_bytes())?,
                Algorithm::HS256,
            ),
            EntryKey::Rsa(pem) => (DecodingKey::from_rsa_pem(pem)?, Algorithm::RS256),
            EntryKey::Ed25519(pem) => (DecodingKey::from_ed_pem(pem)?, Algorithm::EdDSA),
        };
        let mut validation = Validation::new(algorithm);
        validation.set_required_spec_claims(&["exp"]);
        validation.leeway = LEEWAY_SECS;
        Ok(Self {
            key,
            validation,
            login_url: config.login_url.clone(),
        })
    }

    /// The customer key (and contact) a token for room `room` carries.
    pub fn key_of(&self, token: &str, room: &str) -> Result<Member, EntryRefusal> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(EntryRefusal::Forged);
        }
        let claims = jsonwebtoken::decode::<Claims>(token, &self.key, &self.validation)
            .map_err(|e| match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => EntryRefusal::Expired,
                _ => EntryRefusal::Forged,
            })?
            .claims;
        if claims.room.as_deref().is_some_and(|r| r != room) {
            return Err(EntryRefusal::OtherRoom);
        }
        if claims.key.trim().is_empty() {
            return Err(EntryRefusal::Forged);
        }
        if claims
            .contact
            .as_ref()
            .is_some_and(|c| c.len() > MAX_CONTACT_BYTES)
        {
            return Err(EntryRefusal::Forged);
        }
        Ok(Member {
            key: claims.key,
            contact: claims.contact.filter(|c| !c.trim().is_empty()),
        })
    }
}

/// An HS256 entry token for `key`, valid until `exp` (Unix seconds), for `room` if named, with
/// `contact` if given: what the shop's sign-in does, for demos and tests (`waitroom-proxy
/// sign-entry`).
pub fn sign(
    secret: &str,
    key: &str,
    exp: u64,
    room: Option<&str>,
    contact: Option<&str>,
) -> Result<String, jsonwebtoken::errors::Error> {
    let claims = Claims {
        key: key.to_owned(),
        exp,
        room: room.map(str::to_owned),
        contact: contact.map(str::to_owned),
    };
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &claims,
        &EncodingKey::from_secret(secret.as_bytes())?,
    )
}

/// The entry token in a query string, if any.
pub fn token_in(query: Option<&str>) -> Option<Cow<'_, str>> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == ENTRY_PARAM)
        .map(|(_, value)| value)
}

/// `path` and `query` without any `wr_entry` parameter: where the visitor is sent back to.
pub fn without_token(path: &str, query: Option<&str>) -> String {
    let kept: Vec<&str> = query
        .unwrap_or("")
        .split('&')
        // Names compared as `token_in` reads them (percent-decoded): a `wr%5Fentry` left in
        // would send the visitor round the redirect again.
        .filter(|pair| {
            form_urlencoded::parse(pair.as_bytes())
                .next()
                .is_some_and(|(name, _)| name != ENTRY_PARAM)
        })
        .collect();
    if kept.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{}", kept.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "entry-secret-entry-secret-entry-secret!";

    fn verifier() -> EntryVerifier {
        EntryVerifier::new(&EntryConfig {
            key: EntryKey::Secret(SECRET.into()),
            login_url: None,
        })
        .unwrap()
    }

    fn now() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    #[test]
    fn a_token_gives_its_key_in_its_room_only() {
        let v = verifier();
        let any_room = sign(SECRET, "alice", now() + 60, None, None).unwrap();
        assert_eq!(
            v.key_of(&any_room, "drop").map(|m| m.key).as_deref(),
            Ok("alice")
        );
        let this_room = sign(SECRET, "bob", now() + 60, Some("drop"), None).unwrap();
        assert_eq!(
            v.key_of(&this_room, "drop").map(|m| m.key).as_deref(),
            Ok("bob")
        );
        assert_eq!(v.key_of(&this_room, "other"), Err(EntryRefusal::OtherRoom));
    }

    #[test]
    fn expired_forged_and_keyless_tokens_are_refused() {
        let v = verifier();
        let old = sign(SECRET, "alice", now() - 60, None, None).unwrap();
        assert_eq!(v.key_of(&old, "r"), Err(EntryRefusal::Expired));
        let other_secret = sign(
            "another-secret-another-secret-another!",
            "alice",
            now() + 60,
            None,
            None,
        )
        .unwrap();
        assert_eq!(v.key_of(&other_secret, "r"), Err(EntryRefusal::Forged));
        assert_eq!(v.key_of("not.a.token", "r"), Err(EntryRefusal::Forged));
        let keyless = sign(SECRET, " ", now() + 60, None, None).unwrap();
        assert_eq!(v.key_of(&keyless, "r"), Err(EntryRefusal::Forged));
        assert_eq!(v.key_of(&"a".repeat(5000), "r"), Err(EntryRefusal::Forged));
    }

    #[test]
    fn a_contact_is_carried_blank_is_none_and_too_long_is_refused() {
        let v = verifier();
        let with = sign(SECRET, "alice", now() + 60, None, Some("crm:8812")).unwrap();
        assert_eq!(
            v.key_of(&with, "r"),
            Ok(Member {
                key: "alice".into(),
                contact: Some("crm:8812".into())
            })
        );
        let blank = sign(SECRET, "alice", now() + 60, None, Some(" ")).unwrap();
        assert_eq!(v.key_of(&blank, "r").map(|m| m.contact), Ok(None));
        let longest = "c".repeat(MAX_CONTACT_BYTES);
        let at_limit = sign(SECRET, "alice", now() + 60, None, Some(&longest)).unwrap();
        assert!(v.key_of(&at_limit, "r").is_ok());
        let over = format!("{longest}c");
        let too_long = sign(SECRET, "alice", now() + 60, None, Some(&over)).unwrap();
        assert_eq!(v.key_of(&too_long, "r"), Err(EntryRefusal::Forged));
    }

    #[test]
    fn the_token_is_found_and_taken_out_of_the_url() {
        assert_eq!(
            token_in(Some("a=1&wr_entry=t.o.k&b=2")).as_deref(),
            Some("t.o.k")
        );
        assert_eq!(token_in(Some("a=1")), None);
        assert_eq!(token_in(None), None);
        assert_eq!(without_token("/drop", Some("wr_entry=x")), "/drop");
        assert_eq!(
            without_token("/drop", Some("a=1&wr_entry=x&b=2&wr_entry=y")),
            "/drop?a=1&b=2"
        );
        assert_eq!(without_token("/drop", None), "/drop");
        assert_eq!(without_token("/drop", Some("wr%5Fentry=x&c")), "/drop?c");
    }
}
