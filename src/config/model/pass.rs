//! `[pass]`: the signed cookie that carries a visitor's ticket and pass.

use super::values::choice_any_case;
use super::{ConfigError, invalid};
use crate::config::file::PassSection;
use crate::core::sharing::PassLimits;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SameSite {
    Strict,
    Lax,
    None,
}

impl SameSite {
    pub fn as_str(self) -> &'static str {
        match self {
            SameSite::Strict => "Strict",
            SameSite::Lax => "Lax",
            SameSite::None => "None",
        }
    }
}

#[derive(Debug, Clone)]
pub struct PassConfig {
    pub secret: Vec<u8>,
    pub cookie_name: String,
    pub cookie_secure: bool,
    pub cookie_samesite: SameSite,
    /// How a pass may be used: networks per session, requests per minute.
    pub limits: PassLimits,
}

/// `pass.cookie_samesite`, in any case as browsers read it.
pub(crate) fn same_site(text: &str) -> Result<SameSite, ConfigError> {
    choice_any_case(
        "pass.cookie_samesite",
        text,
        &[
            ("Strict", SameSite::Strict),
            ("Lax", SameSite::Lax),
            ("None", SameSite::None),
        ],
    )
}

/// `secret` comes from `pass.secret` or its variable (see `secrets`).
pub(crate) fn pass(pass: &PassSection, secret: String) -> Result<PassConfig, ConfigError> {
    if pass.cookie_name.is_empty()
        || !pass
            .cookie_name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
    {
        return Err(invalid(
            "pass.cookie_name",
            "must be letters, digits, '-', '_' or '.'",
        ));
    }
    let samesite = same_site(&pass.cookie_samesite)?;
    if samesite == SameSite::None && !pass.cookie_secure {
        return Err(invalid(
            "pass.cookie_samesite",
            "None needs cookie_secure = true (browsers drop it otherwise)",
        ));
    }
    Ok(PassConfig {
        secret: secret.into_bytes(),
        cookie_name: pass.cookie_name.clone(),
        cookie_secure: pass.cookie_secure,
        cookie_samesite: samesite,
        limits: PassLimits {
            max_networks: pass.max_networks,
            max_requests_per_minute: pass.max_requests_per_minute,
        },
    })
}
