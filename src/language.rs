//! The languages the built-in pages speak: Cloudflare's tags, the choice of one (fixed, or
//! negotiated from Accept-Language), and how each writes numbers and plurals (CLDR). What the
//! pages say in each is `respond::locale`'s.

/// The locales the built-in pages speak (Cloudflare's tags, a subset of its 38).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Locale {
    EnUs,
    EsEs,
    FrFr,
    DeDe,
    ItIt,
    JaJp,
    PtBr,
    ZhCn,
}

/// Whether 0 takes the singular (CLDR: French and Portuguese say "0 minute", "0 minuto").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plural {
    OneOnly,
    ZeroAndOne,
}

/// How a locale writes big numbers (CLDR).
struct Grouping {
    separator: &'static str,
    /// Spanish leaves four-digit numbers ungrouped ("1234" but "12.345").
    min_digits_to_group: usize,
}

impl Locale {
    pub const ALL: [Locale; 8] = [
        Locale::EnUs,
        Locale::EsEs,
        Locale::FrFr,
        Locale::DeDe,
        Locale::ItIt,
        Locale::JaJp,
        Locale::PtBr,
        Locale::ZhCn,
    ];

    pub fn tag(self) -> &'static str {
        match self {
            Locale::EnUs => "en-US",
            Locale::EsEs => "es-ES",
            Locale::FrFr => "fr-FR",
            Locale::DeDe => "de-DE",
            Locale::ItIt => "it-IT",
            Locale::JaJp => "ja-JP",
            Locale::PtBr => "pt-BR",
            Locale::ZhCn => "zh-CN",
        }
    }

    /// A tag exactly as Cloudflare spells it, in any case.
    pub fn from_tag(tag: &str) -> Option<Locale> {
        Self::ALL
            .into_iter()
            .find(|l| l.tag().eq_ignore_ascii_case(tag.trim()))
    }

    fn language(self) -> &'static str {
        self.tag().split('-').next().unwrap_or("en")
    }

    pub fn plural(self) -> Plural {
        match self {
            Locale::FrFr | Locale::PtBr => Plural::ZeroAndOne,
            _ => Plural::OneOnly,
        }
    }

    /// Whether `n` takes the singular form.
    pub fn is_singular(self, n: u64) -> bool {
        match self.plural() {
            Plural::OneOnly => n == 1,
            Plural::ZeroAndOne => n <= 1,
        }
    }

    fn grouping(self) -> Grouping {
        let (separator, min_digits_to_group) = match self {
            Locale::EnUs | Locale::JaJp | Locale::ZhCn => (",", 4),
            Locale::EsEs => (".", 5),
            Locale::DeDe | Locale::ItIt | Locale::PtBr => (".", 4),
            Locale::FrFr => ("\u{202f}", 4),
        };
        Grouping {
            separator,
            min_digits_to_group,
        }
    }

    /// A whole number with the locale's grouping: 1234567 is "1,234,567" in en-US, "1.234.567" in
    /// de-DE, "1 234 567" (narrow no-break spaces) in fr-FR.
    pub fn number(self, n: u64) -> String {
        let digits = n.to_string();
        let grouping = self.grouping();
        if digits.len() < grouping.min_digits_to_group {
            return digits;
        }
        let mut out = String::with_capacity(digits.len() * 2);
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push_str(grouping.separator);
            }
            out.push(c);
        }
        out
    }
}

/// `[page] default_template_language`: one locale for everyone, or the visitor's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageLanguage {
    Fixed(Locale),
    /// From Accept-Language, falling back to en-US (Cloudflare's default) when nothing matches.
    Auto,
}

pub const FALLBACK: Locale = Locale::EnUs;

impl PageLanguage {
    pub fn parse(text: &str) -> Result<Self, String> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(PageLanguage::Auto);
        }
        Locale::from_tag(text)
            .map(PageLanguage::Fixed)
            .ok_or_else(|| {
                let known: Vec<&str> = Locale::ALL.iter().map(|l| l.tag()).collect();
                format!("{text:?} is not \"auto\" or one of {}", known.join(", "))
            })
    }

    pub fn locale_for(self, accept_language: Option<&str>) -> Locale {
        match self {
            PageLanguage::Fixed(locale) => locale,
            PageLanguage::Auto => accept_language.and_then(negotiate).unwrap_or(FALLBACK),
        }
    }
}

/// The best of our locales for an Accept-Language header: the highest-weighted range that we
/// speak, an exact tag first, else the same language ("es-MX" gets es-ES, "pt" gets pt-BR).
/// Traditional Chinese is not answered with Simplified: it falls through to the next range.
pub fn negotiate(accept_language: &str) -> Option<Locale> {
    let mut ranges: Vec<(u16, usize, &str)> = accept_language
        .split(',')
        .enumerate()
        .filter_map(|(order, part)| {
            let mut pieces = part.split(';');
            let tag = pieces.next()?.trim();
            if tag.is_empty() {
                return None;
            }
            let weight = pieces
                .find_map(|p| {
                    let (name, value) = p.split_once('=')?;
                    name.trim().eq_ignore_ascii_case("q").then_some(value)
                })
                .map_or(1000, weight);
            (weight > 0).then_some((weight, order, tag))
        })
        .collect();
    // Highest weight first; equal weights keep the visitor's order.
    ranges.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ranges.into_iter().find_map(|(_, _, tag)| match_range(tag))
}

/// A q-value (RFC 9110 12.4.2: 0 to 1, at most three decimals) in thousandths. A number above 1
/// counts as 1, so `q=5` cannot outrank a first choice, and decimals past the third are
/// dropped. Anything that is not a plain decimal number (`oops`, `-1`, `inf`, `1e3`) is 0: not
/// acceptable, the one reading that never ranks a range above those the visitor did weigh.
fn weight(q: &str) -> u16 {
    let q = q.trim();
    let (whole, fraction) = q.split_once('.').unwrap_or((q, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return 0;
    }
    if whole.bytes().any(|b| b != b'0') {
        return 1000;
    }
    fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |n, d| n * 10 + u16::from(d - b'0'))
}

fn match_range(range: &str) -> Option<Locale> {
    if let Some(exact) = Locale::from_tag(range) {
        return Some(exact);
    }
    let lower = range.to_ascii_lowercase();
    let language = lower.split(['-', '_']).next().unwrap_or("");
    if language == "zh" {
        let traditional = ["hant", "tw", "hk", "mo"]
            .iter()
            .any(|t| lower.split(['-', '_']).skip(1).any(|s| s == *t));
        return (!traditional).then_some(Locale::ZhCn);
    }
    Locale::ALL.into_iter().find(|l| l.language() == language)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_parse_in_any_case() {
        assert_eq!(Locale::from_tag("fr-fr"), Some(Locale::FrFr));
        assert_eq!(Locale::from_tag("ZH-CN"), Some(Locale::ZhCn));
        assert_eq!(Locale::from_tag("fr"), None);
        assert_eq!(PageLanguage::parse("auto"), Ok(PageLanguage::Auto));
        assert_eq!(
            PageLanguage::parse("de-DE"),
            Ok(PageLanguage::Fixed(Locale::DeDe))
        );
        let error = PageLanguage::parse("ko-KR").err().unwrap_or_default();
        assert!(error.contains("\"ko-KR\""), "{error}");
        assert!(error.contains("pt-BR"), "{error}");
    }

    #[test]
    fn accept_language_picks_the_best_locale_we_speak() {
        assert_eq!(negotiate("fr-FR,fr;q=0.9,en;q=0.8"), Some(Locale::FrFr));
        assert_eq!(negotiate("es-MX"), Some(Locale::EsEs));
        assert_eq!(negotiate("pt"), Some(Locale::PtBr));
        assert_eq!(negotiate("pt-PT;q=0.5, de;q=0.9"), Some(Locale::DeDe));
        assert_eq!(negotiate("ko-KR, ja;q=0.3"), Some(Locale::JaJp));
        assert_eq!(negotiate("zh-TW, en;q=0.5"), Some(Locale::EnUs));
        assert_eq!(negotiate("zh-Hans-CN"), Some(Locale::ZhCn));
        assert_eq!(negotiate("zh"), Some(Locale::ZhCn));
        assert_eq!(negotiate("it;q=0, en;q=0.1"), Some(Locale::EnUs));
        assert_eq!(negotiate("*"), None);
        assert_eq!(negotiate(""), None);
        assert_eq!(negotiate("de;q=oops, it"), Some(Locale::ItIt));
        assert_eq!(negotiate("it;Q=0.2, de ; q = 0.3"), Some(Locale::DeDe));
        assert_eq!(PageLanguage::Auto.locale_for(Some("ko")), FALLBACK);
        assert_eq!(PageLanguage::Auto.locale_for(None), FALLBACK);
        assert_eq!(
            PageLanguage::Fixed(Locale::JaJp).locale_for(Some("de")),
            Locale::JaJp
        );
    }

    #[test]
    fn q_values_are_clamped_to_one_and_malformed_ones_are_not_acceptable() {
        // Above 1 counts as 1: order decides between equals.
        assert_eq!(negotiate("fr, de;q=5"), Some(Locale::FrFr));
        assert_eq!(negotiate("fr;q=1, de;q=1.5"), Some(Locale::FrFr));
        assert_eq!(negotiate("de;q=5, fr"), Some(Locale::DeDe));
        for malformed in ["inf", "NaN", "-1", "1e3", "", ".5", "0:5", "0.5x"] {
            assert_eq!(
                negotiate(&format!("de;q={malformed}, it;q=0.1")),
                Some(Locale::ItIt),
                "q={malformed}"
            );
        }
        for (q, thousandths) in [
            ("1", 1000),
            ("1.000", 1000),
            ("0.5", 500),
            ("0.125", 125),
            ("0.1239", 123),
            ("0", 0),
            ("0.000", 0),
            ("00.9", 900),
            (" 0.8 ", 800),
            ("2", 1000),
            ("10.5", 1000),
        ] {
            assert_eq!(weight(q), thousandths, "q={q}");
        }
    }
}
