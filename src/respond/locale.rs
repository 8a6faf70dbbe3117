//! The built-in pages in the visitor's language: the texts of each locale and wait times written
//! the locale's way. The languages themselves (tags, negotiation, numbers, plurals) are
//! `crate::language`'s; this adds what the pages say in each.
//!
//! The JSON status keeps Cloudflare's English whatever the page language: clients parse it.

use std::sync::OnceLock;

use serde::Serialize;

use crate::core::estimate::{WaitEstimate, minutes_ceil};
use crate::language::{Locale, PluralCategory};

/// Every text of the waiting and closed pages in one language. `{n}`, `{pct}`, `{room}`, `{low}`
/// and `{high}` are placeholders filled in by the page (and by its script); a text that counts
/// has a form per CLDR plural category its language uses (`Forms`).
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
    pub waiting: Forms,
    pub total: Forms,
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
    pub minutes: Forms,
    pub range: &'static str,
    /// The page when forwarding failed; the waiting page's script never shows it.
    #[serde(skip)]
    pub failure: FailureTexts,
}

/// The branded page when the origin failed or the request could not be read. `{n}`: the status.
/// (Serialize only lets the tests walk every text; the page's script never gets these.)
#[derive(Debug, Serialize)]
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
    pub retry_in: Forms,
    /// 403: a pass revoked for being shared (`pass.max_networks`).
    pub shared: &'static str,
    pub shared_message: &'static str,
    /// 403: a members-only line (`[entry]`) and no valid entry token.
    pub members_only: &'static str,
    pub members_only_message: &'static str,
    /// 403: a `block` rule of the room (`[[room.rules]]`) holds for the request.
    pub blocked: &'static str,
    pub blocked_message: &'static str,
}

/// The waiting page's queue id and leave button, the page after leaving, and the notice of the
/// visitor's turn (issue 28); their tables are the block at the end of `texts.rs`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VisitorTexts {
    pub queue_id: &'static str,
    /// Under the queue id: what it is for.
    pub queue_id_note: &'static str,
    pub leave: &'static str,
    /// Shown once the visitor asks to leave, above the button that does it.
    pub leave_confirm: &'static str,
    pub leave_yes: &'static str,
    pub left_heading: &'static str,
    pub left_message: &'static str,
    pub rejoin: &'static str,
    /// The opt-in: a browser notification when the turn comes while the tab is hidden.
    pub notify: &'static str,
    pub notify_on: &'static str,
    /// Notifications refused or missing: the tab's title alone will say it.
    pub notify_title_only: &'static str,
    pub notify_sound: &'static str,
    /// The notification, and the tab's title once it is the visitor's turn.
    pub turn_title: &'static str,
    pub turn_body: &'static str,
}

/// The forms of a text that counts, one per CLDR plural category (whole numbers), as the
/// browser's `Intl.PluralRules` names them for the page's script. `other` is the one every
/// language has, and what a category without its own form falls back to.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Forms {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub one: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub two: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub few: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub many: Option<&'static str>,
    pub other: &'static str,
}

impl Forms {
    /// The form for every number (languages without plurals), and the fallback of the others.
    pub const fn other(text: &'static str) -> Self {
        Forms {
            zero: None,
            one: None,
            two: None,
            few: None,
            many: None,
            other: text,
        }
    }

    pub const fn zero(self, text: &'static str) -> Self {
        Forms {
            zero: Some(text),
            ..self
        }
    }

    pub const fn one(self, text: &'static str) -> Self {
        Forms {
            one: Some(text),
            ..self
        }
    }

    pub const fn two(self, text: &'static str) -> Self {
        Forms {
            two: Some(text),
            ..self
        }
    }

    pub const fn few(self, text: &'static str) -> Self {
        Forms {
            few: Some(text),
            ..self
        }
    }

    pub const fn many(self, text: &'static str) -> Self {
        Forms {
            many: Some(text),
            ..self
        }
    }

    pub fn get(&self, category: PluralCategory) -> Option<&'static str> {
        match category {
            PluralCategory::Zero => self.zero,
            PluralCategory::One => self.one,
            PluralCategory::Two => self.two,
            PluralCategory::Few => self.few,
            PluralCategory::Many => self.many,
            PluralCategory::Other => Some(self.other),
        }
    }
}

mod texts;

/// The pages' side of a language: an inherent impl beside the texts it reads.
impl Locale {
    pub fn visitor_texts(self) -> &'static VisitorTexts {
        texts::visitor(self)
    }

    pub fn texts(self) -> &'static Texts {
        texts::texts(self)
    }

    /// The form of a text for `n`, with `{n}` written the locale's way.
    pub fn count(self, n: u64, forms: &Forms) -> String {
        self.form(n, forms).replace("{n}", &self.number(n))
    }

    /// The form of a text for `n` as it is (for texts beside a number written elsewhere).
    pub fn form(self, n: u64, forms: &Forms) -> &'static str {
        forms.get(self.plural_category(n)).unwrap_or(forms.other)
    }

    pub fn minutes(self, n: u64) -> String {
        self.count(n, &self.texts().minutes)
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

    /// `script_texts` as JSON, serialised once per locale, for a `<script type="application/json">`
    /// element (an attribute would cost every quote six bytes): `<` is written `\u003c`, so no
    /// text can close the element.
    pub fn script_texts_json(self) -> &'static str {
        static JSON: OnceLock<Vec<String>> = OnceLock::new();
        let all = JSON.get_or_init(|| {
            Locale::ALL
                .iter()
                .map(|l| {
                    serde_json::to_string(&l.script_texts())
                        .unwrap_or_default()
                        .replace('<', "\\u003c")
                })
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
        let visitor = self.visitor_texts();
        ScriptTexts {
            locale: self.tag(),
            texts: self.texts(),
            notify_on: visitor.notify_on,
            notify_title_only: visitor.notify_title_only,
            turn_title: visitor.turn_title,
            turn_body: visitor.turn_body,
        }
    }
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScriptTexts {
    pub locale: &'static str,
    #[serde(flatten)]
    pub texts: &'static Texts,
    /// What the script writes of the visitor's texts (the page writes the rest itself).
    pub notify_on: &'static str,
    pub notify_title_only: &'static str,
    pub turn_title: &'static str,
    pub turn_body: &'static str,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

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

    /// Every text of a locale by its name (a form as `name.category`), failure page included.
    fn named_texts(locale: Locale) -> BTreeMap<String, String> {
        fn walk(prefix: &str, value: &Value, out: &mut BTreeMap<String, String>) {
            match value {
                Value::String(text) => {
                    out.insert(prefix.to_owned(), text.clone());
                }
                Value::Object(map) => {
                    for (key, value) in map {
                        walk(&format!("{prefix}.{key}"), value, out);
                    }
                }
                other => panic!("{prefix}: {other}"),
            }
        }
        let mut out = BTreeMap::new();
        let t = locale.texts();
        walk(
            "page",
            &serde_json::to_value(t).unwrap_or_default(),
            &mut out,
        );
        walk(
            "failure",
            &serde_json::to_value(&t.failure).unwrap_or_default(),
            &mut out,
        );
        walk(
            "visitor",
            &serde_json::to_value(locale.visitor_texts()).unwrap_or_default(),
            &mut out,
        );
        out
    }

    fn placeholders(text: &str) -> Vec<&str> {
        text.match_indices('{')
            .filter_map(|(start, _)| {
                let end = text[start..].find('}')?;
                Some(&text[start..=start + end])
            })
            .collect()
    }

    /// Every form of every text that counts, by name.
    fn counted(t: &Texts) -> [(&'static str, &Forms); 4] {
        [
            ("waiting", &t.waiting),
            ("total", &t.total),
            ("minutes", &t.minutes),
            ("retry_in", &t.failure.retry_in),
        ]
    }

    const CATEGORIES: [PluralCategory; 6] = [
        PluralCategory::Zero,
        PluralCategory::One,
        PluralCategory::Two,
        PluralCategory::Few,
        PluralCategory::Many,
        PluralCategory::Other,
    ];

    #[test]
    fn every_locale_has_every_text() {
        let english = named_texts(Locale::EnUs);
        assert!(english.len() > 50, "{}", english.len());
        // The texts a language writes as English does, on purpose (the word is the same).
        let same_as_english = [
            ("es-ES", "failure.kicker"),
            ("tl-PH", "failure.kicker"),
            ("tl-PH", "page.footer"),
        ];
        for locale in Locale::ALL {
            let texts = named_texts(locale);
            for (name, text) in &texts {
                assert!(!text.trim().is_empty(), "{locale:?} {name} is empty");
                assert_eq!(text.trim(), text, "{locale:?} {name}: stray spaces");
                if locale == Locale::EnUs {
                    continue;
                }
                let intended = same_as_english.contains(&(locale.tag(), name.as_str()));
                let copied = english.get(name) == Some(text);
                assert_eq!(copied, intended, "{locale:?} {name}: {text:?} is English's");
            }
            // Every text English has (the forms aside: each language has its own), with the
            // same placeholders.
            for (name, text) in &english {
                // English's singular is not every language's: the forms test checks those.
                let is_form = name.split('.').count() == 3;
                if is_form && !name.ends_with(".other") {
                    continue;
                }
                let ours = texts
                    .get(name)
                    .unwrap_or_else(|| panic!("{locale:?} has no {name}"));
                for placeholder in placeholders(text) {
                    assert!(
                        ours.contains(placeholder),
                        "{locale:?} {name}: {placeholder}"
                    );
                }
            }
        }
    }

    /// A language has a form for each plural category its rule gives a whole number, and none
    /// it never uses. A form may say its number in words ("دقيقتان", "שתי דקות") only where its
    /// category holds a single number.
    #[test]
    fn every_counted_text_has_the_forms_its_language_uses() {
        for locale in Locale::ALL {
            let t = locale.texts();
            for category in CATEGORIES {
                let numbers: Vec<u64> = (0..=1000)
                    .filter(|&n| locale.plural_category(n) == category)
                    .collect();
                for (name, forms) in counted(t) {
                    let english = Locale::EnUs.texts();
                    let needs_number = counted(english)
                        .iter()
                        .any(|(n, f)| *n == name && f.other.contains("{n}"));
                    match (forms.get(category), numbers.is_empty()) {
                        (Some(_), true) if category != PluralCategory::Other => {
                            panic!("{locale:?} {name}: a {category:?} form no number uses")
                        }
                        (None, false) => panic!("{locale:?} {name}: no {category:?} form"),
                        (Some(form), false) if needs_number && numbers.len() > 1 => {
                            assert!(form.contains("{n}"), "{locale:?} {name} {category:?}")
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    #[test]
    fn counts_take_their_languages_forms() {
        let ru = Locale::RuRu;
        assert_eq!(ru.minutes(1), "1 минута");
        assert_eq!(ru.minutes(3), "3 минуты");
        assert_eq!(ru.minutes(11), "11 минут");
        assert_eq!(ru.minutes(21), "21 минута");
        let pl = Locale::PlPl;
        assert_eq!(pl.minutes(22), "22 minuty");
        assert_eq!(pl.minutes(12), "12 minut");
        let ar = Locale::ArEg;
        assert_eq!(ar.minutes(1), "دقيقة واحدة");
        assert_eq!(ar.minutes(2), "دقيقتان");
        assert_eq!(ar.minutes(5), "٥ دقائق");
        assert_eq!(ar.minutes(15), "١٥ دقيقة");
        assert_eq!(ar.minutes(100), "١٠٠ دقيقة");
        assert_eq!(Locale::SlSi.minutes(102), "102 minuti");
        assert_eq!(Locale::CsCz.minutes(4), "4 minuty");
        assert_eq!(Locale::CsCz.minutes(5), "5 minut");
        assert_eq!(Locale::RoRo.minutes(20), "20 de minute");
        assert_eq!(Locale::RoRo.minutes(19), "19 minute");
        assert_eq!(Locale::LtLt.minutes(15), "15 minučių");
        assert_eq!(Locale::HeIl.minutes(2), "שתי דקות");
        assert_eq!(Locale::JaJp.minutes(1), "1分");
        assert_eq!(
            Locale::HiIn
                .wait_text(&WaitEstimate::Exact { seconds: 30 })
                .as_deref(),
            Some("1 मिनट")
        );
    }

    #[test]
    fn the_script_gets_every_form_by_its_cldr_name() {
        let json: Value =
            serde_json::from_str(Locale::ArEg.script_texts_json()).unwrap_or_default();
        assert_eq!(json["locale"], "ar-EG");
        for category in ["zero", "one", "two", "few", "many", "other"] {
            assert!(json["minutes"][category].is_string(), "{category}");
        }
        let de: Value = serde_json::from_str(Locale::DeDe.script_texts_json()).unwrap_or_default();
        assert_eq!(de["minutes"]["one"], "{n} Minute");
        assert!(de["minutes"].get("few").is_none(), "German has no few form");
        assert!(
            de.get("failure").is_none(),
            "the failure page has no script"
        );
    }
}
