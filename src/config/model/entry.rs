//! `[entry]`: members-only lines. A newcomer brings a token the shop signed for a signed-in
//! customer (`wr_entry`); the line holds one place per customer key.

use std::path::Path;

use super::secrets::{ENV_ENTRY_SECRET, MIN_SECRET_BYTES};
use super::{ConfigError, Environment, invalid};
use crate::config::file::EntrySection;

/// What checks an entry token's signature.
#[derive(Clone, PartialEq, Eq)]
pub enum EntryKey {
    /// HS256 with the shop's shared secret: the proxy can also sign (`sign-entry`).
    Secret(String),
    /// RS256: the shop's RSA public key, PEM.
    Rsa(Vec<u8>),
    /// EdDSA: the shop's Ed25519 public key, PEM.
    Ed25519(Vec<u8>),
}

/// By hand: the shared secret must not show in a debug print.
impl std::fmt::Debug for EntryKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            EntryKey::Secret(_) => "Secret(****)",
            EntryKey::Rsa(_) => "Rsa",
            EntryKey::Ed25519(_) => "Ed25519",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryConfig {
    pub key: EntryKey,
    /// Where a newcomer without a token is sent (303); None: a page says the line is for
    /// signed-in customers.
    pub login_url: Option<String>,
}

/// `[entry]`: None unless `require_token`.
pub(crate) fn entry(
    section: &mut EntrySection,
    env: &dyn Environment,
    base_dir: &Path,
) -> Result<Option<EntryConfig>, ConfigError> {
    if let Some(secret) = env.var(ENV_ENTRY_SECRET) {
        section.secret = Some(secret);
    }
    if !section.require_token {
        return Ok(None);
    }
    let key = match (&section.secret, &section.public_key) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "entry.public_key",
                "give entry.secret (HS256) or entry.public_key (RS256, EdDSA), not both",
            ));
        }
        (None, None) => {
            return Err(invalid(
                "entry.secret",
                format!(
                    "entry.require_token needs the key tokens are signed with: entry.secret \
                     (or {ENV_ENTRY_SECRET}) for HS256, or entry.public_key for RS256 or EdDSA"
                ),
            ));
        }
        (Some(secret), None) if secret.len() < MIN_SECRET_BYTES => {
            return Err(invalid(
                "entry.secret",
                format!("must be at least {MIN_SECRET_BYTES} bytes"),
            ));
        }
        (Some(secret), None) => EntryKey::Secret(secret.clone()),
        (None, Some(path)) => public_key(&base_dir.join(path))?,
    };
    let login_url = match &section.login_url {
        None => None,
        Some(url) if url.starts_with('/') && !url.starts_with("//") => Some(url.clone()),
        Some(url) => match reqwest::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {
                Some(url.clone())
            }
            _ => {
                return Err(invalid(
                    "entry.login_url",
                    format!("{url:?} is neither a path (/login) nor an http(s) URL"),
                ));
            }
        },
    };
    Ok(Some(EntryConfig { key, login_url }))
}

/// The PEM's key, RSA or Ed25519, as the token library reads it.
fn public_key(path: &Path) -> Result<EntryKey, ConfigError> {
    let pem = std::fs::read(path).map_err(|e| {
        invalid(
            "entry.public_key",
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    if jsonwebtoken::DecodingKey::from_ed_pem(&pem).is_ok() {
        return Ok(EntryKey::Ed25519(pem));
    }
    if jsonwebtoken::DecodingKey::from_rsa_pem(&pem).is_ok() {
        return Ok(EntryKey::Rsa(pem));
    }
    Err(invalid(
        "entry.public_key",
        format!(
            "{} holds no RSA or Ed25519 public key in PEM",
            path.display()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Env;
    impl Environment for Env {
        fn var(&self, _: &str) -> Option<String> {
            None
        }
    }

    fn check(section: EntrySection) -> Result<Option<EntryConfig>, String> {
        let mut section = section;
        entry(&mut section, &Env, Path::new(".")).map_err(|e| e.to_string())
    }

    fn on(secret: Option<&str>, public_key: Option<&str>, login_url: Option<&str>) -> EntrySection {
        EntrySection {
            require_token: true,
            secret: secret.map(str::to_owned),
            public_key: public_key.map(str::to_owned),
            login_url: login_url.map(str::to_owned),
        }
    }

    #[test]
    fn off_by_default_and_each_mistake_named() {
        assert_eq!(check(EntrySection::default()), Ok(None));
        let secret = "s".repeat(32);
        assert!(
            check(on(Some(&secret), None, Some("/login")))
                .unwrap()
                .is_some()
        );
        assert!(check(on(Some(&secret), None, Some("https://shop.example/in"))).is_ok());
        assert!(
            check(on(None, None, None))
                .unwrap_err()
                .contains("entry.secret")
        );
        assert!(
            check(on(Some("short"), None, None))
                .unwrap_err()
                .contains("at least 32")
        );
        assert!(
            check(on(Some(&secret), Some("k.pem"), None))
                .unwrap_err()
                .contains("not both")
        );
        assert!(
            check(on(None, Some("/nonexistent/k.pem"), None))
                .unwrap_err()
                .contains("entry.public_key")
        );
        for bad in ["//evil.example/x", "javascript:alert(1)", "ftp://x/"] {
            assert!(
                check(on(Some(&secret), None, Some(bad)))
                    .unwrap_err()
                    .contains("entry.login_url"),
                "{bad}"
            );
        }
    }
}
