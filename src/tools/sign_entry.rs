//! `waitroom-proxy sign-entry`: an entry token for a members-only line, signed with the file's
//! `entry.secret` (or `WR_ENTRY_SECRET`), as the shop's sign-in would sign it: for demos and
//! tests. A room keyed by `entry.public_key` cannot: only the shop holds the private key.

use std::time::Duration;

use crate::config::file::ConfigFile;
use crate::config::model::ENV_ENTRY_SECRET;
use crate::config::model::Environment;
use crate::entry::MAX_CONTACT_BYTES;

/// The token asked for.
pub struct Wanted<'a> {
    /// The customer's key (its id at the shop).
    pub key: &'a str,
    pub ttl: Duration,
    /// The room's id, when the token is for one room only.
    pub room: Option<&'a str>,
    /// The shop's key for reaching the customer (`[notify]`).
    pub contact: Option<&'a str>,
}

#[derive(Debug, thiserror::Error)]
pub enum SignEntryError {
    #[error(
        "entry.secret is not set (nor {ENV_ENTRY_SECRET}): with entry.public_key the shop signs \
         tokens with its private key"
    )]
    NoSecret,
    #[error("the key must not be empty")]
    EmptyKey,
    #[error("the contact is longer than {MAX_CONTACT_BYTES} bytes")]
    LongContact,
    #[error("cannot sign: {0}")]
    Sign(#[from] jsonwebtoken::errors::Error),
}

/// The token `wanted`, valid for its `ttl` from `now_secs` (Unix seconds).
pub fn sign_entry(
    file: &ConfigFile,
    env: &dyn Environment,
    wanted: &Wanted<'_>,
    now_secs: u64,
) -> Result<String, SignEntryError> {
    let secret = env
        .var(ENV_ENTRY_SECRET)
        .or_else(|| file.entry.secret.clone())
        .ok_or(SignEntryError::NoSecret)?;
    if wanted.key.trim().is_empty() {
        return Err(SignEntryError::EmptyKey);
    }
    if wanted.contact.is_some_and(|c| c.len() > MAX_CONTACT_BYTES) {
        return Err(SignEntryError::LongContact);
    }
    Ok(crate::entry::sign(
        &secret,
        wanted.key,
        now_secs.saturating_add(wanted.ttl.as_secs()),
        wanted.room,
        wanted.contact,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::{EntryConfig, EntryKey};
    use crate::entry::{EntryVerifier, Member};

    const SECRET: &str = "entry-secret-entry-secret-entry-secret!";

    struct NoEnvironment;

    impl Environment for NoEnvironment {
        fn var(&self, _: &str) -> Option<String> {
            None
        }
    }

    fn file() -> ConfigFile {
        let mut file = ConfigFile::parse("[origin]\naddress = \"127.0.0.1:9\"\n").unwrap();
        file.entry.secret = Some(SECRET.into());
        file
    }

    fn wanted(contact: Option<&str>) -> Wanted<'_> {
        Wanted {
            key: "alice",
            ttl: Duration::from_secs(600),
            room: None,
            contact,
        }
    }

    #[test]
    fn the_contact_is_signed_into_the_token_and_bounded() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let token = sign_entry(&file(), &NoEnvironment, &wanted(Some("crm:8812")), now).unwrap();
        let verifier = EntryVerifier::new(&EntryConfig {
            key: EntryKey::Secret(SECRET.into()),
            login_url: None,
        })
        .unwrap();
        assert_eq!(
            verifier.key_of(&token, "r"),
            Ok(Member {
                key: "alice".into(),
                contact: Some("crm:8812".into())
            })
        );
        let long = "c".repeat(MAX_CONTACT_BYTES + 1);
        assert!(matches!(
            sign_entry(&file(), &NoEnvironment, &wanted(Some(&long)), now),
            Err(SignEntryError::LongContact)
        ));
    }
}
