//! The built-in pages in the visitor's language: the texts of each locale and wait times written
//! the locale's way. The languages themselves (tags, negotiation, numbers, plurals) are
//! `crate::language`'s; this adds what the pages say in each.
//!
//! The JSON status keeps Cloudflare's English whatever the page language: clients parse it.

use std::sync::OnceLock;

use serde::Serialize;

use crate::core::estimate::{WaitEstimate, minutes_ceil};
use crate::language::{Locale, Plural};

/// Every text of the waiting and closed pages in one language. `{n}`, `{pct}`, `{room}`, `{low}`
/// and `{high}` are placeholders filled in by the page (and by its script).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Texts {
    pub heading: &'static str,
    pub message: &'static str,
    pub closed_heading: &'static str,
    pub closed_message: &'static str,
    /// The bot challenge shown instead of a place (`[turnstile]`).
    pub challenge_heading: &'static str,
    pub challenge_message: &'static str,
    pub challenge_retry: &'static str,
    /// The proof of work shown instead of a place (`[proof_of_work]`), and what a browser
    /// without JavaScript or WebCrypto (plain HTTP) is told.
    pub proof_message: &'static str,
    pub proof_needs_script: &'static str,
    pub place_label: &'static str,
    pub number_before: &'static str,
    pub number_after: &'static str,
    /// After the count of waiting visitors under random queueing.
    pub waiting_one: &'static str,
    pub waiting_other: &'static str,
    pub total_one: &'static str,
    pub total_other: &'static str,
    pub random_note: &'static str,
    pub progress_label: &'static str,
    pub progress_value: &'static str,
    pub estimated_wait: &'static str,
    pub last_updated: &'static str,
    pub not_known: &'static str,
    pub wait_note: &'static str,
    pub refresh_note: &'static str,
    /// Before the countdown to an event's start (`{time}`: h:mm:ss).
    pub starts_in: &'static str,
    pub prequeue_note: &'static str,
    /// The pre-queue is shuffled at the start.
    pub prequeue_shuffle_note: &'static str,
    pub live: &'static str,
    pub offline: &'static str,
    pub your_turn: &'static str,
    pub title_position: &'static str,
    pub footer: &'static str,
    pub minute_one: &'static str,
    pub minute_other: &'static str,
    pub range: &'static str,
    /// The page when forwarding failed; the waiting page's script never shows it.
    #[serde(skip)]
    pub failure: FailureTexts,
}

/// The branded page when the origin failed or the request could not be read. `{n}`: the status.
#[derive(Debug)]
pub struct FailureTexts {
    pub kicker: &'static str,
    pub retry: &'static str,
    /// The origin refused, was unreachable, or its name did not resolve.
    pub not_answering: &'static str,
    pub place_kept: &'static str,
    pub too_slow: &'static str,
    pub too_slow_message: &'static str,
    /// The origin answered with a status the proxy passes on as its own page.
    pub went_wrong: &'static str,
    pub try_again: &'static str,
    pub bad_request: &'static str,
    pub bad_request_message: &'static str,
    /// 429: the per-address limit on new places (`[rate_limit]`).
    pub too_many_visitors: &'static str,
    pub too_fast: &'static str,
    pub too_many_live: &'static str,
    /// 429: `pass.max_requests_per_minute`.
    pub too_many_requests: &'static str,
    pub pass_rate: &'static str,
    /// After a 429's reason, with the page's own refresh.
    pub retry_in_one: &'static str,
    pub retry_in_other: &'static str,
    /// 403: a pass revoked for being shared (`pass.max_networks`).
    pub shared: &'static str,
    pub shared_message: &'static str,
    /// 403: a members-only line (`[entry]`) and no valid entry token.
    pub members_only: &'static str,
    pub members_only_message: &'static str,
}

mod texts;
use texts::{DE_DE, EN_US, ES_ES, FR_FR, IT_IT, JA_JP, PT_BR, ZH_CN};

/// The pages' side of a language: an inherent impl beside the texts it reads.
impl Locale {
    pub fn texts(self) -> &'static Texts {
        match self {
            Locale::EnUs => &EN_US,
            Locale::EsEs => &ES_ES,
            Locale::FrFr => &FR_FR,
            Locale::DeDe => &DE_DE,
            Locale::ItIt => &IT_IT,
            Locale::JaJp => &JA_JP,
            Locale::PtBr => &PT_BR,
            Locale::ZhCn => &ZH_CN,
        }
    }

    /// The one or other form of a text, with `{n}` written the locale's way.
    pub fn count(self, n: u64, one: &str, other: &str) -> String {
        let form = if self.is_singular(n) { one } else { other };
        form.replace("{n}", &self.number(n))
    }

    pub fn minutes(self, n: u64) -> String {
        let t = self.texts();
        self.count(n, t.minute_one, t.minute_other)
    }

    /// The wait in this language, or None when it is not known. In en-US this is exactly
    /// Cloudflare's `waitTimeFormatted` ("10 minutes", "5 minutes to 15 minutes").
    pub fn wait_text(self, estimate: &WaitEstimate) -> Option<String> {
        match *estimate {
            WaitEstimate::Unknown => None,
            WaitEstimate::Exact { seconds } => Some(self.minutes(minutes_ceil(seconds))),
            WaitEstimate::Spread { p25, p75, .. } => {
                let (low, high) = (minutes_ceil(p25), minutes_ceil(p75));
                Some(if low == high {
                    self.minutes(low)
                } else {
                    self.texts()
                        .range
                        .replace("{low}", &self.minutes(low))
                        .replace("{high}", &self.minutes(high))
                })
            }
        }
    }

    /// `script_texts` as JSON, serialised once per locale.
    pub fn script_texts_json(self) -> &'static str {
        static JSON: OnceLock<Vec<String>> = OnceLock::new();
        let all = JSON.get_or_init(|| {
            Locale::ALL
                .iter()
                .map(|l| serde_json::to_string(&l.script_texts()).unwrap_or_default())
                .collect()
        });
        Locale::ALL
            .iter()
            .position(|l| *l == self)
            .and_then(|i| all.get(i))
            .map_or("{}", String::as_str)
    }

    /// What the page's script needs to write the same texts the server wrote.
    pub fn script_texts(self) -> ScriptTexts {
        ScriptTexts {
            locale: self.tag(),
            zero_is_singular: self.plural() == Plural::ZeroAndOne,
            texts: self.texts(),
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptTexts {
    pub locale: &'static str,
    pub zero_is_singular: bool,
    #[serde(flatten)]
    pub texts: &'static Texts,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_wait_texts_are_cloudflares() {
        let en = Locale::EnUs;
        assert_eq!(en.wait_text(&WaitEstimate::Unknown), None);
        assert_eq!(
            en.wait_text(&WaitEstimate::Exact { seconds: 30 })
                .as_deref(),
            Some("1 minute")
        );
        assert_eq!(
            en.wait_text(&WaitEstimate::Exact { seconds: 600 })
                .as_deref(),
            Some("10 minutes")
        );
        let spread = WaitEstimate::Spread {
            p25: 300,
            p50: 600,
            p75: 900,
        };
        assert_eq!(
            en.wait_text(&spread).as_deref(),
            Some("5 minutes to 15 minutes")
        );
    }

    #[test]
    fn every_locale_writes_waits_and_numbers_its_own_way() {
        let spread = WaitEstimate::Spread {
            p25: 300,
            p50: 600,
            p75: 900,
        };
        let cases = [
            (
                Locale::EnUs,
                "1,234,567",
                "1 minute",
                "5 minutes to 15 minutes",
            ),
            (
                Locale::EsEs,
                "1.234.567",
                "1 minuto",
                "entre 5 minutos y 15 minutos",
            ),
            (
                Locale::FrFr,
                "1\u{202f}234\u{202f}567",
                "1\u{a0}minute",
                "entre 5\u{a0}minutes et 15\u{a0}minutes",
            ),
            (
                Locale::DeDe,
                "1.234.567",
                "1 Minute",
                "5 Minuten bis 15 Minuten",
            ),
            (
                Locale::ItIt,
                "1.234.567",
                "1 minuto",
                "da 5 minuti a 15 minuti",
            ),
            (Locale::JaJp, "1,234,567", "1分", "5分〜15分"),
            (
                Locale::PtBr,
                "1.234.567",
                "1 minuto",
                "de 5 minutos a 15 minutos",
            ),
            (Locale::ZhCn, "1,234,567", "1 分钟", "5 分钟至15 分钟"),
        ];
        for (locale, big, one, range) in cases {
            assert_eq!(locale.number(1_234_567), big, "{locale:?}");
            assert_eq!(
                locale
                    .wait_text(&WaitEstimate::Exact { seconds: 45 })
                    .as_deref(),
                Some(one),
                "{locale:?}"
            );
            assert_eq!(
                locale.wait_text(&spread).as_deref(),
                Some(range),
                "{locale:?}"
            );
            assert_eq!(locale.number(999), "999");
        }
        assert_eq!(
            Locale::EsEs.number(1234),
            "1234",
            "CLDR: no grouping below 5 digits"
        );
        assert_eq!(Locale::EsEs.number(12_345), "12.345");
        assert_eq!(Locale::DeDe.number(1234), "1.234");
        assert_eq!(Locale::EnUs.minutes(0), "0 minutes");
        assert_eq!(Locale::FrFr.minutes(0), "0\u{a0}minute");
    }

    #[test]
    fn every_locale_has_every_text() {
        for locale in Locale::ALL {
            let json = serde_json::to_value(locale.script_texts()).unwrap_or_default();
            let map = json.as_object().cloned().unwrap_or_default();
            assert!(map.len() > 25, "{locale:?}");
            for (key, value) in &map {
                if let Some(text) = value.as_str() {
                    assert!(!text.trim().is_empty(), "{locale:?} {key}");
                }
            }
            let t = locale.texts();
            for (name, text, placeholder) in [
                ("total_one", t.total_one, "{n}"),
                ("total_other", t.total_other, "{n}"),
                ("progress_value", t.progress_value, "{pct}"),
                ("title_position", t.title_position, "{n}"),
                ("footer", t.footer, "{room}"),
                ("minute_one", t.minute_one, "{n}"),
                ("minute_other", t.minute_other, "{n}"),
                ("range", t.range, "{high}"),
                ("range", t.range, "{low}"),
            ] {
                assert!(text.contains(placeholder), "{locale:?} {name}");
            }
            if locale != Locale::EnUs {
                assert_ne!(t.heading, EN_US.heading, "{locale:?} is translated");
                assert_ne!(t.estimated_wait, EN_US.estimated_wait, "{locale:?}");
                assert_ne!(t.challenge_message, EN_US.challenge_message, "{locale:?}");
                assert_ne!(t.proof_message, EN_US.proof_message, "{locale:?}");
                assert_ne!(t.proof_needs_script, EN_US.proof_needs_script, "{locale:?}");
            }
        }
    }
}
