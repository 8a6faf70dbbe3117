//! The visitor's cookie: a signed ticket or pass, with the attributes `[pass]` sets. Built with
//! the `cookie` crate so that the attributes are written as RFC 6265 wants them.

use std::sync::Arc;

use cookie::Cookie;

use crate::clock::SharedClock;
use crate::config::model::{PassConfig, SameSite};
use crate::token::{Pass, Signer, Ticket};

pub struct CookieJar {
    name: String,
    /// `room.cookie_domain`: sent to every host under it; None, the host's alone.
    domain: Option<String>,
    secure: bool,
    same_site: cookie::SameSite,
    signer: Arc<Signer>,
    clock: SharedClock,
}

impl CookieJar {
    /// `name`: the room's cookie (`pass.cookie_name`, with the room's id when there are several);
    /// `domain`: the room's `cookie_domain`.
    pub fn new(
        config: &PassConfig,
        name: &str,
        domain: Option<&str>,
        signer: Arc<Signer>,
        clock: SharedClock,
    ) -> Self {
        Self {
            name: name.to_owned(),
            domain: domain.map(str::to_owned),
            secure: config.cookie_secure,
            same_site: match config.cookie_samesite {
                SameSite::Strict => cookie::SameSite::Strict,
                SameSite::Lax => cookie::SameSite::Lax,
                SameSite::None => cookie::SameSite::None,
            },
            signer,
            clock,
        }
    }

    fn set_cookie(&self, value: String, max_age_secs: i64) -> String {
        let mut cookie = Cookie::build((self.name.clone(), value))
            .path("/")
            .max_age(cookie::time::Duration::seconds(max_age_secs))
            .http_only(true)
            .same_site(self.same_site)
            .secure(self.secure);
        if let Some(domain) = &self.domain {
            cookie = cookie.domain(domain.clone());
        }
        cookie.build().to_string()
    }

    /// A Set-Cookie value that deletes the visitor's cookie.
    pub fn clearing(&self) -> String {
        self.set_cookie(String::new(), 0)
    }

    /// The pass as a cookie that lives as long as the pass; None when it cannot be signed
    /// (logged: the visitor then simply gets no cookie and comes back as a newcomer).
    pub fn pass(&self, pass: &Pass) -> Option<String> {
        let raw = self
            .signer
            .sign_pass(pass)
            .map_err(|e| log::error!("{e}"))
            .ok()?;
        // The expiry is the store's answer: a damaged one must not overflow the subtraction.
        let max_age = pass.expires_at.saturating_sub(self.clock.now_ms()).max(0) / 1000 + 1;
        Some(self.set_cookie(raw, max_age))
    }

    /// The ticket as a cookie that lives as long as a silent visitor keeps its place.
    pub fn ticket(&self, ticket: &Ticket, lifetime_secs: u64) -> Option<String> {
        let raw = self
            .signer
            .sign_ticket(ticket)
            .map_err(|e| log::error!("{e}"))
            .ok()?;
        Some(self.set_cookie(raw, i64::try_from(lifetime_secs.max(1)).unwrap_or(i64::MAX)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn cookies_carry_every_attribute() {
        let config = PassConfig {
            secret: b"0123456789abcdef0123456789abcdef".to_vec(),
            cookie_name: "waitroom".into(),
            cookie_secure: true,
            cookie_samesite: SameSite::Lax,
            limits: crate::core::sharing::PassLimits::OFF,
        };
        let clock = ManualClock::new(1_000_000);
        let signer = Arc::new(Signer::new("room", &config.secret).unwrap());
        let jar = CookieJar::new(&config, "waitroom", None, signer.clone(), clock.clone());
        let cleared = jar.clearing();
        assert!(
            !cleared.contains("Domain"),
            "host-only by default: {cleared}"
        );
        for attribute in [
            "waitroom=",
            "Path=/",
            "Max-Age=0",
            "HttpOnly",
            "SameSite=Lax",
            "Secure",
        ] {
            assert!(cleared.contains(attribute), "{attribute} in {cleared}");
        }
        let pass = Pass {
            id: "v".into(),
            epoch: "e".into(),
            admitted_at: 1_000_000,
            renewed_at: 1_000_000,
            expires_at: 1_300_000,
        };
        let set = jar.pass(&pass).unwrap();
        assert!(set.contains("Max-Age=301"), "{set}");
        // An expiry from a damaged store: an expired cookie, not an overflow.
        let damaged = Pass {
            expires_at: i64::MIN,
            ..pass.clone()
        };
        let set = jar.pass(&damaged).unwrap();
        assert!(
            set.contains("Max-Age=1;") || set.ends_with("Max-Age=1"),
            "{set}"
        );

        // A room over several hosts: the cookie and its clearing both name the domain (a
        // clearing without it would leave the domain's cookie in place).
        let shared = CookieJar::new(&config, "waitroom", Some("example.com"), signer, clock);
        for set in [shared.clearing(), shared.pass(&pass).unwrap()] {
            assert!(set.contains("Domain=example.com"), "{set}");
        }
    }
}
