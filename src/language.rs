//! The languages the built-in pages speak: Cloudflare's tags, the choice of one (fixed, or
//! negotiated from Accept-Language), and how each writes numbers and plurals (CLDR). What the
//! pages say in each is `respond::locale`'s.

/// The locales the built-in pages speak: all of Cloudflare's 38, with its tags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Locale {
    EnUs,
    EsEs,
    DeDe,
    FrFr,
    ItIt,
    JaJp,
    KoKr,
    PtBr,
    ZhCn,
    ZhTw,
    NlNl,
    PlPl,
    IdId,
    TrTr,
    ArEg,
    RuRu,
    FaIr,
    BgBg,
    HrHr,
    CsCz,
    DaDk,
    FiFi,
    LtLt,
    MsMy,
    NbNo,
    RoRo,
    ElGr,
    HeIl,
    HiIn,
    HuHu,
    SrBa,
    SkSk,
    SlSi,
    SvSe,
    TlPh,
    ThTh,
    UkUa,
    ViVn,
}

/// CLDR's plural categories, of which each language uses some (for whole numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluralCategory {
    Zero,
    One,
    Two,
    Few,
    Many,
    Other,
}

/// Which CLDR plural rule a language follows, for whole numbers (the pages count people,
/// minutes and seconds, never fractions).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PluralRule {
    /// Japanese, Chinese, Korean, Indonesian, Malay, Thai, Vietnamese: one form.
    None,
    /// 1 alone is singular (English, German, ...).
    OneOnly,
    /// 0 and 1 are singular (French, Portuguese, Hindi, Persian).
    ZeroAndOne,
    /// Russian, Ukrainian: 1, 21, 31 (one); 2-4, 22-24 (few); the rest (many).
    EastSlavic,
    /// Polish: 1 (one); 2-4, 22-24 but not 12-14 (few); the rest (many).
    Polish,
    /// Czech, Slovak: 1 (one); 2-4 (few); the rest.
    CzechSlovak,
    /// Croatian, Serbian: 1, 21, 31 (one); 2-4, 22-24 (few); the rest.
    SouthSlavic,
    /// Slovenian: by the last two digits, 1 (one), 2 (two), 3-4 (few).
    Slovenian,
    /// Lithuanian: 1, 21 but not 11 (one); 2-9, 22-29 but not 12-19 (few); the rest.
    Lithuanian,
    /// Romanian: 1 (one); 0 and 2-19 by the last two digits, not 1 itself (few); the rest.
    Romanian,
    /// Arabic: 0, 1, 2, 3-10, 11-99 (by the last two digits), the rest.
    Arabic,
    /// Hebrew: 1 (one), 2 (two), the rest.
    Hebrew,
    /// Filipino: singular unless the last digit is 4, 6 or 9.
    Filipino,
}

/// The digits a locale writes numbers with (what the browser's `toLocaleString` writes too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Digits {
    Latin,
    /// ٠١٢٣٤٥٦٧٨٩, Arabic as written in Egypt.
    ArabicIndic,
    /// ۰۱۲۳۴۵۶۷۸۹, Persian.
    ExtendedArabicIndic,
}

/// How a locale writes big numbers (CLDR).
struct Grouping {
    separator: &'static str,
    /// Spanish, Polish, Bulgarian, Hungarian and Slovenian leave four-digit numbers ungrouped
    /// ("1234" but "12.345").
    min_digits_to_group: usize,
    /// Hindi groups by two above the thousands ("12,34,567").
    indian: bool,
    digits: Digits,
}

/// The direction a locale's script runs: the `dir` of the pages' html element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    Ltr,
    Rtl,
}

impl Direction {
    pub fn attribute(self) -> &'static str {
        match self {
            Direction::Ltr => "ltr",
            Direction::Rtl => "rtl",
        }
    }
}

impl Locale {
    /// In Cloudflare's order (infra/cloudflare validates the same list).
    pub const ALL: [Locale; 38] = [
        Locale::EnUs,
        Locale::EsEs,
        Locale::DeDe,
        Locale::FrFr,
        Locale::ItIt,
        Locale::JaJp,
        Locale::KoKr,
        Locale::PtBr,
        Locale::ZhCn,
        Locale::ZhTw,
        Locale::NlNl,
        Locale::PlPl,
        Locale::IdId,
        Locale::TrTr,
        Locale::ArEg,
        Locale::RuRu,
        Locale::FaIr,
        Locale::BgBg,
        Locale::HrHr,
        Locale::CsCz,
        Locale::DaDk,
        Locale::FiFi,
        Locale::LtLt,
        Locale::MsMy,
        Locale::NbNo,
        Locale::RoRo,
        Locale::ElGr,
        Locale::HeIl,
        Locale::HiIn,
        Locale::HuHu,
        Locale::SrBa,
        Locale::SkSk,
        Locale::SlSi,
        Locale::SvSe,
        Locale::TlPh,
        Locale::ThTh,
        Locale::UkUa,
        Locale::ViVn,
    ];

    pub fn tag(self) -> &'static str {
        match self {
            Locale::EnUs => "en-US",
            Locale::EsEs => "es-ES",
            Locale::DeDe => "de-DE",
            Locale::FrFr => "fr-FR",
            Locale::ItIt => "it-IT",
            Locale::JaJp => "ja-JP",
            Locale::KoKr => "ko-KR",
            Locale::PtBr => "pt-BR",
            Locale::ZhCn => "zh-CN",
            Locale::ZhTw => "zh-TW",
            Locale::NlNl => "nl-NL",
            Locale::PlPl => "pl-PL",
            Locale::IdId => "id-ID",
            Locale::TrTr => "tr-TR",
            Locale::ArEg => "ar-EG",
            Locale::RuRu => "ru-RU",
            Locale::FaIr => "fa-IR",
            Locale::BgBg => "bg-BG",
            Locale::HrHr => "hr-HR",
            Locale::CsCz => "cs-CZ",
            Locale::DaDk => "da-DK",
            Locale::FiFi => "fi-FI",
            Locale::LtLt => "lt-LT",
            Locale::MsMy => "ms-MY",
            Locale::NbNo => "nb-NO",
            Locale::RoRo => "ro-RO",
            Locale::ElGr => "el-GR",
            Locale::HeIl => "he-IL",
            Locale::HiIn => "hi-IN",
            Locale::HuHu => "hu-HU",
            Locale::SrBa => "sr-BA",
            Locale::SkSk => "sk-SK",
            Locale::SlSi => "sl-SI",
            Locale::SvSe => "sv-SE",
            Locale::TlPh => "tl-PH",
            Locale::ThTh => "th-TH",
            Locale::UkUa => "uk-UA",
            Locale::ViVn => "vi-VN",
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

    pub fn direction(self) -> Direction {
        match self {
            Locale::ArEg | Locale::FaIr | Locale::HeIl => Direction::Rtl,
            _ => Direction::Ltr,
        }
    }

    fn plural_rule(self) -> PluralRule {
        match self {
            Locale::JaJp
            | Locale::KoKr
            | Locale::ZhCn
            | Locale::ZhTw
            | Locale::IdId
            | Locale::MsMy
            | Locale::ThTh
            | Locale::ViVn => PluralRule::None,
            Locale::FrFr | Locale::PtBr | Locale::HiIn | Locale::FaIr => PluralRule::ZeroAndOne,
            Locale::RuRu | Locale::UkUa => PluralRule::EastSlavic,
            Locale::PlPl => PluralRule::Polish,
            Locale::CsCz | Locale::SkSk => PluralRule::CzechSlovak,
            Locale::HrHr | Locale::SrBa => PluralRule::SouthSlavic,
            Locale::SlSi => PluralRule::Slovenian,
            Locale::LtLt => PluralRule::Lithuanian,
            Locale::RoRo => PluralRule::Romanian,
            Locale::ArEg => PluralRule::Arabic,
            Locale::HeIl => PluralRule::Hebrew,
            Locale::TlPh => PluralRule::Filipino,
            Locale::EnUs
            | Locale::EsEs
            | Locale::DeDe
            | Locale::ItIt
            | Locale::NlNl
            | Locale::TrTr
            | Locale::BgBg
            | Locale::DaDk
            | Locale::FiFi
            | Locale::NbNo
            | Locale::ElGr
            | Locale::HuHu
            | Locale::SvSe => PluralRule::OneOnly,
        }
    }

    /// The CLDR plural category of the whole number `n`: the same the browser's
    /// `Intl.PluralRules` gives the page's script. (CLDR's "many" for exact millions in
    /// French, Spanish, Italian and Portuguese is left out: it only changes compact notation,
    /// which the pages do not use, and those texts have no such form.)
    pub fn plural_category(self, n: u64) -> PluralCategory {
        use PluralCategory::{Few, Many, One, Other, Two, Zero};
        let (last, last_two) = (n % 10, n % 100);
        match self.plural_rule() {
            PluralRule::None => Other,
            PluralRule::OneOnly if n == 1 => One,
            PluralRule::OneOnly => Other,
            PluralRule::ZeroAndOne if n <= 1 => One,
            PluralRule::ZeroAndOne => Other,
            PluralRule::EastSlavic if last == 1 && last_two != 11 => One,
            PluralRule::EastSlavic if (2..=4).contains(&last) && !(12..=14).contains(&last_two) => {
                Few
            }
            PluralRule::EastSlavic => Many,
            PluralRule::Polish if n == 1 => One,
            PluralRule::Polish if (2..=4).contains(&last) && !(12..=14).contains(&last_two) => Few,
            PluralRule::Polish => Many,
            PluralRule::CzechSlovak if n == 1 => One,
            PluralRule::CzechSlovak if (2..=4).contains(&n) => Few,
            PluralRule::CzechSlovak => Other,
            PluralRule::SouthSlavic if last == 1 && last_two != 11 => One,
            PluralRule::SouthSlavic
                if (2..=4).contains(&last) && !(12..=14).contains(&last_two) =>
            {
                Few
            }
            PluralRule::SouthSlavic => Other,
            PluralRule::Slovenian => match last_two {
                1 => One,
                2 => Two,
                3 | 4 => Few,
                _ => Other,
            },
            PluralRule::Lithuanian if (11..=19).contains(&last_two) => Other,
            PluralRule::Lithuanian if last == 1 => One,
            PluralRule::Lithuanian if last >= 2 => Few,
            PluralRule::Lithuanian => Other,
            PluralRule::Romanian if n == 1 => One,
            PluralRule::Romanian if n == 0 || (1..=19).contains(&last_two) => Few,
            PluralRule::Romanian => Other,
            PluralRule::Arabic => match (n, last_two) {
                (0, _) => Zero,
                (1, _) => One,
                (2, _) => Two,
                (_, 3..=10) => Few,
                (_, 11..=99) => Many,
                _ => Other,
            },
            PluralRule::Hebrew => match n {
                1 => One,
                2 => Two,
                _ => Other,
            },
            PluralRule::Filipino if matches!(last, 4 | 6 | 9) => Other,
            PluralRule::Filipino => One,
        }
    }

    fn grouping(self) -> Grouping {
        const NBSP: &str = "\u{a0}";
        const ARABIC_THOUSANDS: &str = "\u{66c}";
        let (separator, min_digits_to_group, digits) = match self {
            Locale::EnUs
            | Locale::JaJp
            | Locale::KoKr
            | Locale::ZhCn
            | Locale::ZhTw
            | Locale::MsMy
            | Locale::HeIl
            | Locale::HiIn
            | Locale::TlPh
            | Locale::ThTh => (",", 4, Digits::Latin),
            Locale::EsEs | Locale::SlSi => (".", 5, Digits::Latin),
            Locale::DeDe
            | Locale::ItIt
            | Locale::PtBr
            | Locale::NlNl
            | Locale::IdId
            | Locale::TrTr
            | Locale::HrHr
            | Locale::DaDk
            | Locale::RoRo
            | Locale::ElGr
            | Locale::SrBa
            | Locale::ViVn => (".", 4, Digits::Latin),
            Locale::FrFr => ("\u{202f}", 4, Digits::Latin),
            Locale::PlPl | Locale::BgBg | Locale::HuHu => (NBSP, 5, Digits::Latin),
            Locale::RuRu
            | Locale::CsCz
            | Locale::FiFi
            | Locale::LtLt
            | Locale::NbNo
            | Locale::SkSk
            | Locale::SvSe
            | Locale::UkUa => (NBSP, 4, Digits::Latin),
            Locale::ArEg => (ARABIC_THOUSANDS, 4, Digits::ArabicIndic),
            Locale::FaIr => (ARABIC_THOUSANDS, 4, Digits::ExtendedArabicIndic),
        };
        Grouping {
            separator,
            min_digits_to_group,
            indian: self == Locale::HiIn,
            digits,
        }
    }

    /// A whole number the way the browser's `toLocaleString` writes it in this locale:
    /// 1234567 is "1,234,567" in en-US, "1.234.567" in de-DE, "1 234 567" (narrow no-break
    /// spaces) in fr-FR, "12,34,567" in hi-IN and "١٬٢٣٤٬٥٦٧" in ar-EG.
    pub fn number(self, n: u64) -> String {
        let digits = n.to_string();
        let grouping = self.grouping();
        let len = digits.len();
        // Where a separator goes before the digit at index i: every three from the right, or
        // in India three then every two.
        let separator_before = |i: usize| {
            let from_right = len - i;
            if grouping.indian && from_right > 3 {
                (from_right - 3).is_multiple_of(2)
            } else {
                from_right.is_multiple_of(3)
            }
        };
        let group = len >= grouping.min_digits_to_group;
        let mut out = String::with_capacity(len * 3);
        for (i, c) in digits.chars().enumerate() {
            if group && i > 0 && separator_before(i) {
                out.push_str(grouping.separator);
            }
            out.push(grouping.digits.write(c));
        }
        out
    }
}

impl Locale {
    /// `text` with its ASCII digits in the locale's own: a clock or a percentage reads like the
    /// numbers beside it ("١:٠٥:٠٩" in ar-EG).
    pub fn digits(self, text: &str) -> String {
        let digits = self.grouping().digits;
        text.chars().map(|c| digits.write(c)).collect()
    }
}

impl Digits {
    /// One ASCII digit in these digits (anything else is left as it is).
    fn write(self, ascii: char) -> char {
        let zero = match self {
            Digits::Latin => return ascii,
            Digits::ArabicIndic => 0x660,
            Digits::ExtendedArabicIndic => 0x6f0,
        };
        ascii
            .to_digit(10)
            .and_then(|d| char::from_u32(zero + d))
            .unwrap_or(ascii)
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
    let mut subtags = lower.split(['-', '_']);
    let language = subtags.next().unwrap_or("");
    let rest: Vec<&str> = subtags.collect();
    let has = |subtag: &str| rest.contains(&subtag);
    match language {
        // The script decides (zh-Hant-CN is Traditional, zh-Hans-TW Simplified); without one,
        // the places that write Traditional.
        "zh" if has("hans") => Some(Locale::ZhCn),
        "zh" if has("hant") || has("tw") || has("hk") || has("mo") => Some(Locale::ZhTw),
        // "no" is Norwegian as a whole; a Nynorsk reader reads Bokmål.
        "no" | "nn" => Some(Locale::NbNo),
        // Filipino is the standard form of Tagalog, and what browsers send for it.
        "fil" => Some(Locale::TlPh),
        // ISO 639's withdrawn codes for Hebrew and Indonesian, still sent by old Java clients.
        "iw" => Some(Locale::HeIl),
        "in" => Some(Locale::IdId),
        _ => Locale::ALL.into_iter().find(|l| l.language() == language),
    }
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
        let error = PageLanguage::parse("sw-KE").err().unwrap_or_default();
        assert!(error.contains("\"sw-KE\""), "{error}");
        assert!(error.contains("pt-BR"), "{error}");
    }

    #[test]
    fn accept_language_picks_the_best_locale_we_speak() {
        assert_eq!(negotiate("fr-FR,fr;q=0.9,en;q=0.8"), Some(Locale::FrFr));
        assert_eq!(negotiate("es-MX"), Some(Locale::EsEs));
        assert_eq!(negotiate("pt"), Some(Locale::PtBr));
        assert_eq!(negotiate("pt-PT;q=0.5, de;q=0.9"), Some(Locale::DeDe));
        assert_eq!(negotiate("sw-KE, ja;q=0.3"), Some(Locale::JaJp));
        assert_eq!(negotiate("zh-TW, en;q=0.5"), Some(Locale::ZhTw));
        assert_eq!(negotiate("zh-Hans-CN"), Some(Locale::ZhCn));
        assert_eq!(negotiate("zh"), Some(Locale::ZhCn));
        assert_eq!(negotiate("it;q=0, en;q=0.1"), Some(Locale::EnUs));
        assert_eq!(negotiate("*"), None);
        assert_eq!(negotiate(""), None);
        assert_eq!(negotiate("de;q=oops, it"), Some(Locale::ItIt));
        assert_eq!(negotiate("it;Q=0.2, de ; q = 0.3"), Some(Locale::DeDe));
        assert_eq!(PageLanguage::Auto.locale_for(Some("sw")), FALLBACK);
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

    #[test]
    fn every_cloudflare_tag_parses_and_round_trips() {
        assert_eq!(Locale::ALL.len(), 38);
        for locale in Locale::ALL {
            let tag = locale.tag();
            assert_eq!(Locale::from_tag(tag), Some(locale), "{tag}");
            assert_eq!(Locale::from_tag(&tag.to_ascii_lowercase()), Some(locale));
            assert_eq!(
                Locale::from_tag(&format!(" {} ", tag.to_ascii_uppercase())),
                Some(locale)
            );
            assert_eq!(PageLanguage::parse(tag), Ok(PageLanguage::Fixed(locale)));
            assert_eq!(negotiate(tag), Some(locale), "{tag} negotiates to itself");
        }
        let tags: std::collections::BTreeSet<&str> = Locale::ALL.iter().map(|l| l.tag()).collect();
        assert_eq!(tags.len(), 38, "no tag twice");
    }

    #[test]
    fn right_to_left_is_arabic_hebrew_and_persian() {
        let rtl: Vec<&str> = Locale::ALL
            .into_iter()
            .filter(|l| l.direction() == Direction::Rtl)
            .map(Locale::tag)
            .collect();
        assert_eq!(rtl, ["ar-EG", "fa-IR", "he-IL"]);
        assert_eq!(Locale::HeIl.direction().attribute(), "rtl");
        assert_eq!(Locale::DeDe.direction().attribute(), "ltr");
    }

    #[test]
    fn a_language_without_its_region_gets_the_one_we_speak() {
        for (range, locale) in [
            ("ar", Locale::ArEg),
            ("ar-SA", Locale::ArEg),
            ("he", Locale::HeIl),
            ("iw", Locale::HeIl),
            ("fa", Locale::FaIr),
            ("fa-AF", Locale::FaIr),
            ("pt", Locale::PtBr),
            ("pt-PT", Locale::PtBr),
            ("zh-TW", Locale::ZhTw),
            ("zh-HK", Locale::ZhTw),
            ("zh-Hant", Locale::ZhTw),
            ("zh_hant_cn", Locale::ZhTw),
            ("zh-Hans-TW", Locale::ZhCn),
            ("zh-SG", Locale::ZhCn),
            ("sr", Locale::SrBa),
            ("sr-Latn-RS", Locale::SrBa),
            ("no", Locale::NbNo),
            ("nn-NO", Locale::NbNo),
            ("nb", Locale::NbNo),
            ("fil", Locale::TlPh),
            ("tl", Locale::TlPh),
            ("in", Locale::IdId),
            ("ms-SG", Locale::MsMy),
            ("uk", Locale::UkUa),
            ("ko", Locale::KoKr),
            ("hi", Locale::HiIn),
            ("en-GB", Locale::EnUs),
        ] {
            assert_eq!(negotiate(range), Some(locale), "{range}");
        }
        // The visitor's order still decides: Hebrew first, then Arabic.
        assert_eq!(negotiate("he-IL, ar;q=0.8, en;q=0.5"), Some(Locale::HeIl));
        assert_eq!(negotiate("sw, ar-EG;q=0.7, en;q=0.5"), Some(Locale::ArEg));
        assert_eq!(negotiate("ar;q=0.4, fa;q=0.6"), Some(Locale::FaIr));
        // A made-up language is not matched by a prefix of ours.
        assert_eq!(negotiate("zhx, nob"), None);
    }

    /// The categories the browser's `Intl.PluralRules` gives 0 to 112 (ICU 78, CLDR 48; z
    /// zero, 1 one, 2 two, f few, m many, o other): the page's script picks its forms by them,
    /// so the server must pick the same.
    #[test]
    fn plural_categories_are_cldrs() {
        let cldr = [
            (
                "en-US",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "es-ES",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "de-DE",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "fr-FR",
                "11ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "it-IT",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "ja-JP",
                "ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "ko-KR",
                "ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "pt-BR",
                "11ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "zh-CN",
                "ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "zh-TW",
                "ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "nl-NL",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "pl-PL",
                "m1fffmmmmmmmmmmmmmmmmmfffmmmmmmmfffmmmmmmmfffmmmmmmmfffmmmmmmmfffmmmmmmmfffmmmmmmmfffmmmmmmmfffmmmmmmmfffmmmmmmmm",
            ),
            (
                "id-ID",
                "ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "tr-TR",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "ar-EG",
                "z12ffffffffmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmmoooffffffffmm",
            ),
            (
                "ru-RU",
                "m1fffmmmmmmmmmmmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmmmm",
            ),
            (
                "fa-IR",
                "11ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "bg-BG",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "hr-HR",
                "o1fffoooooooooooooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooooo",
            ),
            (
                "cs-CZ",
                "o1fffoooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "da-DK",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "fi-FI",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "lt-LT",
                "o1ffffffffooooooooooo1ffffffffo1ffffffffo1ffffffffo1ffffffffo1ffffffffo1ffffffffo1ffffffffo1ffffffffo1ffffffffooo",
            ),
            (
                "ms-MY",
                "ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "nb-NO",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "ro-RO",
                "f1ffffffffffffffffffoooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooffffffffffff",
            ),
            (
                "el-GR",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "he-IL",
                "o12oooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "hi-IN",
                "11ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "hu-HU",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "sr-BA",
                "o1fffoooooooooooooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooo1fffoooooooo",
            ),
            (
                "sk-SK",
                "o1fffoooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "sl-SI",
                "o12ffoooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo12ffoooooooo",
            ),
            (
                "sv-SE",
                "o1ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "tl-PH",
                "1111o1o11o1111o1o11o1111o1o11o1111o1o11o1111o1o11o1111o1o11o1111o1o11o1111o1o11o1111o1o11o1111o1o11o1111o1o11o111",
            ),
            (
                "th-TH",
                "ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
            (
                "uk-UA",
                "m1fffmmmmmmmmmmmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmm1fffmmmmmmmm",
            ),
            (
                "vi-VN",
                "ooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo",
            ),
        ];
        let letter = |c: PluralCategory| match c {
            PluralCategory::Zero => 'z',
            PluralCategory::One => '1',
            PluralCategory::Two => '2',
            PluralCategory::Few => 'f',
            PluralCategory::Many => 'm',
            PluralCategory::Other => 'o',
        };
        assert_eq!(cldr.len(), Locale::ALL.len());
        for (tag, expected) in cldr {
            let locale = Locale::from_tag(tag).unwrap_or(FALLBACK);
            assert_eq!(locale.tag(), tag);
            let ours: String = (0..=112)
                .map(|n| letter(locale.plural_category(n)))
                .collect();
            assert_eq!(ours, expected, "{tag}");
        }
        // Past 112 the rules go by the last digits.
        assert_eq!(Locale::RuRu.plural_category(1_021), PluralCategory::One);
        assert_eq!(Locale::ArEg.plural_category(1_005), PluralCategory::Few);
        assert_eq!(Locale::ArEg.plural_category(1_000), PluralCategory::Other);
        assert_eq!(Locale::SlSi.plural_category(1_002), PluralCategory::Two);
    }

    #[test]
    fn numbers_are_written_as_the_browser_writes_them() {
        // From (n).toLocaleString(tag) in Node (ICU 78).
        for (locale, four, five, seven) in [
            (Locale::EnUs, "1,234", "12,345", "1,234,567"),
            (Locale::PlPl, "1234", "12\u{a0}345", "1\u{a0}234\u{a0}567"),
            (Locale::HuHu, "1234", "12\u{a0}345", "1\u{a0}234\u{a0}567"),
            (Locale::SlSi, "1234", "12.345", "1.234.567"),
            (
                Locale::RuRu,
                "1\u{a0}234",
                "12\u{a0}345",
                "1\u{a0}234\u{a0}567",
            ),
            (Locale::HiIn, "1,234", "12,345", "12,34,567"),
            (Locale::ArEg, "١٬٢٣٤", "١٢٬٣٤٥", "١٬٢٣٤٬٥٦٧"),
            (Locale::FaIr, "۱٬۲۳۴", "۱۲٬۳۴۵", "۱٬۲۳۴٬۵۶۷"),
            (Locale::HeIl, "1,234", "12,345", "1,234,567"),
            (Locale::ViVn, "1.234", "12.345", "1.234.567"),
        ] {
            assert_eq!(locale.number(1234), four, "{locale:?}");
            assert_eq!(locale.number(12_345), five, "{locale:?}");
            assert_eq!(locale.number(1_234_567), seven, "{locale:?}");
        }
        assert_eq!(Locale::HiIn.number(123_456_789), "12,34,56,789");
        assert_eq!(Locale::ArEg.number(0), "٠");
        assert_eq!(Locale::HiIn.number(999), "999");
        assert_eq!(Locale::ArEg.digits("1:05:09 UTC"), "١:٠٥:٠٩ UTC");
        assert_eq!(Locale::FaIr.digits("45"), "۴۵");
        assert_eq!(Locale::HeIl.digits("1:05:09"), "1:05:09");
    }
}
