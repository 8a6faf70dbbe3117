//! Visitor-facing HTML pages: the waiting page, the closed ("sold out") page and the branded
//! origin-error page. Templates live in `templates/` (askama's default directory). The waiting
//! and closed pages speak the locale they are given (see `locale`).
//!
//! Everything a page needs is inline (CSS and JS); the only external resource is the shop's own
//! logo when one is configured. The waiting page is fully server-rendered so it works with
//! JavaScript off (the proxy sends a `Refresh` header); the script only makes it live.

use std::sync::OnceLock;

use askama::Template;

use crate::clock::{Millis, rfc3339_ms};
use crate::config::model::Branding;
use crate::core::estimate::WaitEstimate;
use crate::gate::Limit;
use crate::language::Locale;
use crate::respond::locale::{Texts, VisitorTexts};

/// A room's pages as configured, with their colours derived once: the contrast checks are a
/// measurable share of a page render, and the colours change only with the config.
#[derive(Debug)]
pub struct Look {
    pub branding: Branding,
    theme: Theme,
}

impl Look {
    pub fn new(branding: Branding) -> Self {
        let theme = Theme::new(&branding);
        Self { branding, theme }
    }
}

/// What the waiting page shows to one visitor.
#[derive(Debug, Clone)]
pub struct WaitingView<'a> {
    pub look: &'a Look,
    pub locale: Locale,
    pub room_name: &'a str,
    /// Exact 1-based place; None under random queueing (the queued count is shown instead).
    pub position: Option<u64>,
    /// Visitors waiting in total.
    pub queued: u64,
    /// Position when the visitor joined, for the progress bar (progress = 1 - position/initial).
    pub initial_position: Option<u64>,
    /// Written in the page's language.
    pub estimate: WaitEstimate,
    /// RFC 3339 UTC, e.g. "2026-11-29T20:01:02.000Z".
    pub last_updated: String,
    /// How often the script polls (the no-JS path relies on an HTTP `Refresh` header).
    pub refresh_interval_seconds: u64,
    /// JSON endpoint the script polls, e.g. "/__waitroom/status".
    pub status_url: &'a str,
    /// Where the leave button posts, e.g. "/__waitroom/leave".
    pub leave_url: &'a str,
    /// The visitor's queue id (`core::queue_id`), as shown.
    pub queue_id: &'a str,
    /// While an event's pre-queue is open: the countdown to its start.
    pub countdown: Option<Countdown>,
    /// The governing event's own heading and message, in place of the room's.
    pub heading: Option<&'a str>,
    pub message: Option<&'a str>,
}

/// The countdown to an event's start on the waiting page.
#[derive(Debug, Clone, Copy)]
pub struct Countdown {
    pub starts_at: Millis,
    pub now: Millis,
    /// The pre-queue is shuffled at the start: arriving early gives no edge.
    pub shuffled: bool,
}

/// "1:05:09" or "4:59": language-neutral, and what the script writes as it counts down.
fn clock_text(ms: Millis) -> String {
    let s = (ms.max(0) as u64).div_ceil(1000);
    let (h, m, s) = (s / 3600, (s % 3600) / 60, s % 60);
    if h > 0 {
        format!("{h}:{m:02}:{s:02}")
    } else {
        format!("{m}:{s:02}")
    }
}

/// What the template shows of a countdown.
struct CountdownText {
    starts_at: String,
    /// Shown under the countdown when an operator's message took the lead.
    /// The server's time, so the script counts down on the server's clock, not the device's.
    now: Millis,
    left: String,
    note: Option<&'static str>,
}

/// The page after the visitor left the line on purpose: an offer to join again at the back.
#[derive(Debug, Clone)]
pub struct LeftView<'a> {
    pub look: &'a Look,
    pub locale: Locale,
    pub room_name: &'a str,
    pub rejoin_url: &'a str,
}

/// The "reject" page: the room is closed or sold out.
#[derive(Debug, Clone)]
pub struct ClosedView<'a> {
    pub look: &'a Look,
    pub locale: Locale,
    pub room_name: &'a str,
}

/// The challenge a newcomer passes before it gets a place (`[turnstile]`, `[proof_of_work]`).
#[derive(Debug, Clone)]
pub struct ChallengeView<'a> {
    pub look: &'a Look,
    pub locale: Locale,
    pub room_name: &'a str,
    /// What the page says the challenge is for (the locale's text for it).
    pub message: &'static str,
    /// The Turnstile widget (`turnstile::widget_html`) or the proof of work's solver
    /// (`respond::proof::widget`), inserted as it is.
    pub widget: &'a str,
}

/// A small branded error page, e.g. for 502/504 when the shop's origin is down or slow.
#[derive(Debug, Clone)]
pub struct ErrorView<'a> {
    pub look: &'a Look,
    pub locale: Locale,
    pub status: u16,
    pub failure: Failure,
}

/// Why the proxy answers with its own page where the origin's answer was due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// The origin refused, was unreachable, failed its TLS handshake or did not resolve: the
    /// visitor keeps its place or pass.
    NotAnswering,
    /// The origin did not answer in time.
    TooSlow,
    /// The origin's answer could not be passed on as it was.
    Status,
    /// The visitor's request could not be read.
    BadRequest,
    /// 429: a limit on new places or on a pass's requests; the page tries again by itself.
    Limited { limit: Limit, retry_after_secs: u64 },
    /// 403: the visitor's pass was revoked for being shared.
    Shared,
    /// 403: the line is for signed-in customers (`[entry]`), and no valid token came.
    MembersOnly,
    /// 403: a `block` rule of the room holds for the request.
    Blocked,
}

/// The waiting page's script (templates/waiting.js) as the page carries it: without its
/// indentation and its comment blocks, which are for whoever reads the file, not for every
/// visitor's download. Compacted once.
fn waiting_script() -> &'static str {
    static SCRIPT: OnceLock<String> = OnceLock::new();
    SCRIPT.get_or_init(|| compact_script(include_str!("../../templates/waiting.js")))
}

/// Lines trimmed, blank lines and whole-line `/* ... */` blocks dropped; nothing else changes,
/// so the script must keep to lines a trim cannot alter (no multi-line strings).
fn compact_script(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    let mut in_comment = false;
    for line in script.lines().map(str::trim) {
        if in_comment || line.starts_with("/*") {
            in_comment = !line.ends_with("*/");
            continue;
        }
        if !line.is_empty() {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

pub fn render_waiting(view: &WaitingView) -> Result<String, askama::Error> {
    let (locale, b) = (view.locale, &view.look.branding);
    let t = locale.texts();
    let position = view.position.map(|p| locale.number(p));
    let place_key = format!(
        "{}|{}",
        view.position
            .map_or_else(|| "null".to_owned(), |p| p.to_string()),
        view.queued
    );
    let sub_text = match view.position {
        Some(_) if view.queued == 0 => String::new(),
        Some(_) => locale.count(view.queued, &t.total),
        // A pre-queue shows no place yet: the countdown's note says why.
        None if view.countdown.is_some() => String::new(),
        None => t.random_note.to_owned(),
    };
    let wait_text = locale.wait_text(&view.estimate);
    let heading = view.heading.or(b.heading.as_deref()).unwrap_or(t.heading);
    let prequeue_note = view.countdown.map(|c| {
        if c.shuffled {
            t.prequeue_shuffle_note
        } else {
            t.prequeue_note
        }
    });
    // Before a drop "very busy right now" is not true yet: the pre-queue's own note leads, unless
    // the operator wrote a message, which the note then follows.
    let message = view.message.or(b.message.as_deref());
    let countdown = view.countdown.map(|c| CountdownText {
        starts_at: rfc3339_ms(c.starts_at),
        now: c.now,
        left: locale.digits(&clock_text(c.starts_at - c.now)),
        note: if message.is_some() {
            prequeue_note
        } else {
            None
        },
    });
    let progress = progress_percent(view.position, view.initial_position);
    WaitingPage {
        b,
        t,
        lang: locale.tag(),
        dir: locale.direction().attribute(),
        i18n: locale.script_texts_json(),
        theme: &view.look.theme,
        heading,
        message: message.or(prequeue_note).unwrap_or(t.message),
        footer: t.footer.replace("{room}", view.room_name),
        status_url: view.status_url,
        leave_url: view.leave_url,
        queue_id: view.queue_id,
        v: locale.visitor_texts(),
        script: waiting_script(),
        countdown,
        refresh: view.refresh_interval_seconds.max(1),
        initial: view
            .initial_position
            .map(|p| p.to_string())
            .unwrap_or_default(),
        title_prefix: position
            .as_ref()
            .map(|p| format!("{} · ", t.title_position.replace("{n}", p)))
            .unwrap_or_default(),
        base_title: format!("{heading} · {}", b.title),
        position_attr: view.position.map(|p| p.to_string()).unwrap_or_default(),
        position,
        queued: view.queued,
        queued_text: locale.number(view.queued),
        people_waiting: locale.form(view.queued, &t.waiting),
        place_key,
        sub_text,
        progress_text: progress
            .map(|pct| t.progress_value.replace("{pct}", &locale.number(pct)))
            .unwrap_or_default(),
        progress,
        wait_known: wait_text.is_some(),
        wait_display: wait_text.unwrap_or_else(|| t.not_known.to_owned()),
        last_updated: &view.last_updated,
        last_updated_text: locale.digits(&utc_clock(&view.last_updated)),
    }
    .render()
}

pub fn render_left(view: &LeftView) -> Result<String, askama::Error> {
    let v = view.locale.visitor_texts();
    LeftPage {
        b: &view.look.branding,
        lang: view.locale.tag(),
        dir: view.locale.direction().attribute(),
        theme: &view.look.theme,
        v,
        rejoin_url: view.rejoin_url,
        footer: view.locale.texts().footer.replace("{room}", view.room_name),
    }
    .render()
}

pub fn render_closed(view: &ClosedView) -> Result<String, askama::Error> {
    let b = &view.look.branding;
    let t = view.locale.texts();
    ClosedPage {
        b,
        lang: view.locale.tag(),
        dir: view.locale.direction().attribute(),
        theme: &view.look.theme,
        heading: b.closed_heading.as_deref().unwrap_or(t.closed_heading),
        message: b.closed_message.as_deref().unwrap_or(t.closed_message),
        footer: t.footer.replace("{room}", view.room_name),
    }
    .render()
}

/// The page that asks for a challenge: Cloudflare's Turnstile (an external script: the widget
/// cannot be inlined) or the proof of work (inline).
pub fn render_challenge(view: &ChallengeView) -> Result<String, askama::Error> {
    let b = &view.look.branding;
    let t = view.locale.texts();
    ChallengePage {
        b,
        lang: view.locale.tag(),
        dir: view.locale.direction().attribute(),
        theme: &view.look.theme,
        heading: t.challenge_heading,
        message: view.message,
        retry: t.challenge_retry,
        widget: view.widget,
        footer: t.footer.replace("{room}", view.room_name),
    }
    .render()
}

pub fn render_error(view: &ErrorView) -> Result<String, askama::Error> {
    let locale = view.locale;
    let t = &locale.texts().failure;
    let (heading, message) = match view.failure {
        Failure::NotAnswering => (t.not_answering, t.place_kept.to_owned()),
        Failure::TooSlow => (t.too_slow, t.too_slow_message.to_owned()),
        Failure::Status => (t.went_wrong, t.try_again.to_owned()),
        Failure::BadRequest => (t.bad_request, t.bad_request_message.to_owned()),
        Failure::Limited {
            limit,
            retry_after_secs,
        } => {
            let (heading, reason) = match limit {
                Limit::TooFast => (t.too_many_visitors, t.too_fast),
                Limit::TooManyLive => (t.too_many_visitors, t.too_many_live),
                Limit::PassRate => (t.too_many_requests, t.pass_rate),
            };
            let retry = locale.count(retry_after_secs, &t.retry_in);
            (heading, format!("{reason} {retry}"))
        }
        Failure::Shared => (t.shared, t.shared_message.to_owned()),
        Failure::MembersOnly => (t.members_only, t.members_only_message.to_owned()),
        Failure::Blocked => (t.blocked, t.blocked_message.to_owned()),
    };
    ErrorPage {
        b: &view.look.branding,
        lang: view.locale.tag(),
        dir: view.locale.direction().attribute(),
        theme: &view.look.theme,
        status: view.status,
        kicker: t.kicker.replace("{n}", &view.status.to_string()),
        heading,
        message,
        retry: t.retry,
    }
    .render()
}

#[derive(Template)]
#[template(path = "waiting.html", whitespace = "minimize")]
struct WaitingPage<'a> {
    b: &'a Branding,
    t: &'static Texts,
    lang: &'static str,
    /// "rtl" for Arabic, Hebrew and Persian: the html element's `dir`.
    dir: &'static str,
    /// The locale's texts for the script, as JSON.
    i18n: &'static str,
    theme: &'a Theme,
    heading: &'a str,
    message: &'a str,
    footer: String,
    status_url: &'a str,
    leave_url: &'a str,
    queue_id: &'a str,
    v: &'static VisitorTexts,
    /// templates/waiting.js, compacted.
    script: &'static str,
    countdown: Option<CountdownText>,
    refresh: u64,
    initial: String,
    title_prefix: String,
    base_title: String,
    position: Option<String>,
    position_attr: String,
    queued: u64,
    queued_text: String,
    people_waiting: &'static str,
    place_key: String,
    sub_text: String,
    progress: Option<u64>,
    progress_text: String,
    wait_display: String,
    wait_known: bool,
    last_updated: &'a str,
    last_updated_text: String,
}

#[derive(Template)]
#[template(path = "left.html", whitespace = "minimize")]
struct LeftPage<'a> {
    b: &'a Branding,
    lang: &'static str,
    dir: &'static str,
    theme: &'a Theme,
    v: &'static VisitorTexts,
    rejoin_url: &'a str,
    footer: String,
}

#[derive(Template)]
#[template(path = "closed.html", whitespace = "minimize")]
struct ClosedPage<'a> {
    b: &'a Branding,
    lang: &'static str,
    dir: &'static str,
    theme: &'a Theme,
    heading: &'a str,
    message: &'a str,
    footer: String,
}

#[derive(Template)]
#[template(path = "challenge.html", whitespace = "minimize")]
struct ChallengePage<'a> {
    b: &'a Branding,
    lang: &'static str,
    dir: &'static str,
    theme: &'a Theme,
    heading: &'static str,
    message: &'static str,
    retry: &'static str,
    widget: &'a str,
    footer: String,
}

#[derive(Template)]
#[template(path = "error.html", whitespace = "minimize")]
struct ErrorPage<'a> {
    b: &'a Branding,
    lang: &'static str,
    dir: &'static str,
    theme: &'a Theme,
    status: u16,
    kicker: String,
    heading: &'static str,
    message: String,
    retry: &'static str,
}

/// Percent of the way to the front, rounded down (so 100 is never shown while still waiting).
fn progress_percent(position: Option<u64>, initial: Option<u64>) -> Option<u64> {
    let (position, initial) = (position?, initial?);
    if initial == 0 {
        return None;
    }
    if position >= initial {
        return Some(0);
    }
    Some((initial - position).saturating_mul(100) / initial)
}

/// "2026-11-29T20:01:02.000Z" -> "20:01:02 UTC" for the no-JS page (the script shows local time).
fn utc_clock(rfc3339: &str) -> String {
    let is_utc = rfc3339.ends_with('Z') || rfc3339.ends_with("+00:00");
    match rfc3339.get(11..19) {
        Some(clock) if is_utc && rfc3339.as_bytes().get(10) == Some(&b'T') => {
            format!("{clock} UTC")
        }
        _ => rfc3339.to_owned(),
    }
}

const DEFAULT_PRIMARY: Rgb = Rgb(0x1f, 0x4e, 0xd8);
const DEFAULT_BACKGROUND: Rgb = Rgb(0xf7, 0xf7, 0xf8);
const DEFAULT_TEXT: Rgb = Rgb(0x11, 0x18, 0x27);
const WHITE: Rgb = Rgb(0xff, 0xff, 0xff);
const INK: Rgb = Rgb(0x11, 0x18, 0x27);
const PAPER: Rgb = Rgb(0xf9, 0xfa, 0xfb);
/// WCAG AA for normal text.
const MIN_TEXT_CONTRAST: f64 = 4.5;

/// Colours injected into the `:root` CSS block. All are `#rrggbb` built here, so nothing from the
/// config reaches the stylesheet unparsed; derived shades keep text readable whatever is set.
#[derive(Debug)]
struct Theme {
    primary: String,
    on_primary: String,
    bg: String,
    text: String,
    muted: String,
    card: String,
    panel: String,
    track: String,
    border: String,
    accent: String,
    scheme: &'static str,
}

impl Theme {
    fn new(b: &Branding) -> Self {
        let primary = Rgb::parse(&b.primary_color).unwrap_or(DEFAULT_PRIMARY);
        let bg = Rgb::parse(&b.background_color).unwrap_or(DEFAULT_BACKGROUND);
        let dark = bg.contrast(WHITE) > bg.contrast(INK);
        let card = if dark { bg.mix(WHITE, 0.06) } else { WHITE };
        let panel = card.mix(primary, 0.06);
        let surfaces = [bg, card, panel];
        let readable = |c: Rgb| {
            surfaces
                .iter()
                .map(|s| c.contrast(*s))
                .fold(f64::INFINITY, f64::min)
        };
        let mut text = Rgb::parse(&b.text_color).unwrap_or(DEFAULT_TEXT);
        if readable(text) < MIN_TEXT_CONTRAST {
            text = if readable(INK) >= readable(PAPER) {
                INK
            } else {
                PAPER
            };
        }
        // Softer secondary text, as soft as it can be while still passing AA.
        let muted = [0.36, 0.28, 0.2, 0.12, 0.0]
            .iter()
            .map(|t| text.mix(card, *t))
            .find(|c| readable(*c) >= MIN_TEXT_CONTRAST)
            .unwrap_or(text);
        // The brand colour as text (big number, icons, focus ring), nudged towards the text
        // colour until it is readable on every surface.
        let accent = [0.0, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9]
            .iter()
            .map(|t| primary.mix(text, *t))
            .find(|c| readable(*c) >= MIN_TEXT_CONTRAST)
            .unwrap_or(text);
        let on_primary = if primary.contrast(WHITE) >= primary.contrast(INK) {
            WHITE
        } else {
            INK
        };
        Theme {
            primary: primary.hex(),
            on_primary: on_primary.hex(),
            bg: bg.hex(),
            text: text.hex(),
            muted: muted.hex(),
            card: card.hex(),
            panel: panel.hex(),
            track: card.mix(primary, 0.18).hex(),
            border: card.mix(text, 0.1).hex(),
            accent: accent.hex(),
            scheme: if dark { "dark" } else { "light" },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Rgb(u8, u8, u8);

impl Rgb {
    /// `#rgb` or `#rrggbb`; anything else is rejected.
    fn parse(s: &str) -> Option<Rgb> {
        let hex = s.trim().strip_prefix('#')?;
        if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        let channel = |i: usize, len: usize| -> Option<u8> {
            let v = u8::from_str_radix(hex.get(i * len..(i + 1) * len)?, 16).ok()?;
            Some(if len == 1 { v * 17 } else { v })
        };
        let len = match hex.len() {
            3 => 1,
            6 => 2,
            _ => return None,
        };
        Some(Rgb(channel(0, len)?, channel(1, len)?, channel(2, len)?))
    }

    fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }

    /// WCAG relative luminance.
    fn luminance(self) -> f64 {
        let lin = |c: u8| {
            let c = f64::from(c) / 255.0;
            if c <= 0.04045 {
                c / 12.92
            } else {
                ((c + 0.055) / 1.055).powf(2.4)
            }
        };
        0.2126 * lin(self.0) + 0.7152 * lin(self.1) + 0.0722 * lin(self.2)
    }

    /// WCAG contrast ratio, 1.0 to 21.0.
    fn contrast(self, other: Rgb) -> f64 {
        let (a, b) = (self.luminance(), other.luminance());
        (a.max(b) + 0.05) / (a.min(b) + 0.05)
    }

    /// `t` of the way from `self` to `other`.
    fn mix(self, other: Rgb, t: f64) -> Rgb {
        let m = |a: u8, b: u8| {
            let v = f64::from(a) + (f64::from(b) - f64::from(a)) * t;
            // Clamped to 0..=255 first, so the cast cannot truncate.
            v.round().clamp(0.0, 255.0) as u8
        };
        Rgb(m(self.0, other.0), m(self.1, other.1), m(self.2, other.2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::language::PageLanguage;

    const LOGO: &str = "https://cdn.example-shop.com/assets/logo.svg";

    fn branding() -> Branding {
        Branding {
            title: "Sneaker drop".into(),
            logo_url: Some(LOGO.into()),
            primary_color: "#1f4ed8".into(),
            background_color: "#f7f7f8".into(),
            text_color: "#111827".into(),
            heading: Some("You're in line".into()),
            message: Some(
                "This shop is very busy right now. Keep this tab open: you will be let in \
                 automatically."
                    .into(),
            ),
            closed_heading: Some("Sold out".into()),
            closed_message: Some("This drop is closed. Thank you for your interest.".into()),
            language: PageLanguage::Fixed(Locale::EnUs),
        }
    }

    fn waiting(b: &Look) -> WaitingView<'_> {
        WaitingView {
            look: b,
            locale: Locale::EnUs,
            room_name: "sneaker-drop",
            position: Some(42),
            queued: 1834,
            initial_position: Some(1200),
            estimate: WaitEstimate::Exact { seconds: 230 },
            last_updated: "2026-11-29T20:01:02.000Z".into(),
            refresh_interval_seconds: 20,
            status_url: "/__waitroom/status",
            leave_url: "/__waitroom/leave",
            queue_id: "ABCD-EFGH-JKMN",
            countdown: None,
            heading: None,
            message: None,
        }
    }

    fn get(s: &str) -> Rgb {
        Rgb::parse(s).unwrap_or_else(|| panic!("bad colour {s}"))
    }

    fn assert_no_urls(html: &str) {
        let rest = html.replace(LOGO, "");
        for needle in ["http://", "https://", "//", "url(", "@import"] {
            assert!(!rest.contains(needle), "found {needle:?} in page");
        }
    }

    #[test]
    fn waiting_page_renders_position_and_details() -> Result<(), askama::Error> {
        let b = Look::new(branding());
        let html = render_waiting(&waiting(&b))?;
        assert!(html.starts_with("<!doctype html>"));
        assert!(html.contains("<html lang=\"en-US\" dir=\"ltr\">"));
        assert!(html.contains(r#"<strong class="num">42</strong>"#));
        assert!(html.contains("You are number"));
        assert!(html.contains("1,834 people waiting in total"));
        assert!(html.contains(r#"<dd id="wr-wait" aria-live="polite">4 minutes</dd>"#));
        assert!(html.contains(
            r#"<time id="wr-time" datetime="2026-11-29T20:01:02.000Z">20:01:02 UTC</time>"#
        ));
        assert!(html.contains(r#"aria-live="polite""#));
        assert!(html.contains(r#"data-status-url="/__waitroom/status""#));
        assert!(html.contains(r#"data-refresh="20""#));
        assert!(html.contains("<title>#42 in line · You&#39;re in line · Sneaker drop</title>"));
        assert!(html.contains("--primary:#1f4ed8;"));
        assert!(html.contains(&format!(r#"src="{LOGO}""#)));
        assert!(html.contains("Refreshing this page won’t lose your place"));
        assert!(html.contains("Waiting room: sneaker-drop"));
        assert!(html.contains(r#"id="wr-wait-note" hidden"#));
        Ok(())
    }

    #[test]
    fn the_script_goes_out_without_comments_or_indentation_and_whole() {
        let script = waiting_script();
        assert!(!script.contains("/*"), "a comment left in");
        assert!(script.lines().all(|l| l.trim() == l && !l.is_empty()));
        let code_lines = include_str!("../../templates/waiting.js")
            .lines()
            .filter(|l| !l.trim().is_empty())
            .count();
        assert!(script.lines().count() > code_lines * 3 / 4, "too much cut");
        assert!(script.starts_with("(function () {") && script.ends_with("})();\n"));
        assert_eq!(
            compact_script("  a();\n  /* one\n     two */\n\n  b(); /* kept */\n"),
            "a();\nb(); /* kept */\n"
        );
    }

    #[test]
    fn waiting_page_is_small() -> Result<(), askama::Error> {
        let b = Look::new(branding());
        let html = render_waiting(&waiting(&b))?;
        assert!(html.len() < 20 * 1024, "{} bytes", html.len());
        Ok(())
    }

    #[test]
    fn random_queueing_shows_the_queued_count() -> Result<(), askama::Error> {
        let b = Look::new(branding());
        let view = WaitingView {
            position: None,
            initial_position: None,
            queued: 1500,
            ..waiting(&b)
        };
        let html = render_waiting(&view)?;
        assert!(html.contains(
            r#"<strong class="num">1,500</strong> <span class="lbl">people are waiting</span>"#
        ));
        assert!(!html.contains(r#"<span class="lbl">You are number</span>"#));
        assert!(html.contains(r#"class="bar indeterminate""#));
        assert!(!html.contains(r#" aria-valuenow=""#));
        assert!(html.contains("<title>You&#39;re in line · Sneaker drop</title>"));

        let one = WaitingView { queued: 1, ..view };
        assert!(render_waiting(&one)?.contains("person is waiting"));
        Ok(())
    }

    #[test]
    fn unknown_wait_is_said_honestly() -> Result<(), askama::Error> {
        let b = Look::new(branding());
        let view = WaitingView {
            estimate: WaitEstimate::Unknown,
            ..waiting(&b)
        };
        let html = render_waiting(&view)?;
        assert!(html.contains(r#"<dd id="wr-wait" aria-live="polite">Not known yet</dd>"#));
        assert!(html.contains("We can’t estimate your wait yet"));
        assert!(!html.contains(r#"id="wr-wait-note" hidden"#));
        assert!(!html.contains("unavailable"));
        Ok(())
    }

    #[test]
    fn progress_for_position_25_of_100_is_75_percent() -> Result<(), askama::Error> {
        assert_eq!(progress_percent(Some(25), Some(100)), Some(75));
        assert_eq!(progress_percent(Some(1), Some(1)), Some(0));
        assert_eq!(progress_percent(Some(150), Some(100)), Some(0));
        assert_eq!(progress_percent(Some(1), Some(100)), Some(99));
        assert_eq!(progress_percent(None, Some(100)), None);
        assert_eq!(progress_percent(Some(5), None), None);
        assert_eq!(progress_percent(Some(5), Some(0)), None);

        let b = Look::new(branding());
        let view = WaitingView {
            position: Some(25),
            initial_position: Some(100),
            ..waiting(&b)
        };
        let html = render_waiting(&view)?;
        assert!(html.contains(r#"role="progressbar""#));
        assert!(html.contains(r#"aria-valuenow="75""#));
        assert!(html.contains(r#"style="width:75%""#));
        Ok(())
    }

    #[test]
    fn the_challenge_page_loads_only_turnstile_and_speaks_the_locale() -> Result<(), askama::Error>
    {
        let b = Look::new(branding());
        let widget = crate::turnstile::widget_html(
            "1x00000000000000000000AA",
            crate::config::model::TurnstileMode::Invisible,
            crate::turnstile::TURNSTILE_PATH,
        );
        let view = ChallengeView {
            look: &b,
            locale: Locale::DeDe,
            room_name: "sneaker-drop",
            message: Locale::DeDe.texts().challenge_message,
            widget: &widget,
        };
        let html = render_challenge(&view)?;
        assert!(html.contains(r#"data-sitekey="1x00000000000000000000AA""#));
        assert!(html.contains("<h1>Einen Moment bitte</h1>"));
        assert!(html.contains(r#"id="wr-challenge-retry""#));
        assert!(!html.contains("&lt;script"), "the widget is not escaped");
        assert_no_urls(&html.replace(crate::turnstile::SCRIPT_URL, ""));
        Ok(())
    }

    #[test]
    fn no_external_references_except_the_logo() -> Result<(), askama::Error> {
        let b = Look::new(branding());
        assert_no_urls(&render_waiting(&waiting(&b))?);
        assert_no_urls(&render_closed(&ClosedView {
            look: &b,
            locale: Locale::EnUs,
            room_name: "sneaker-drop",
        })?);
        assert_no_urls(&render_error(&ErrorView {
            look: &b,
            locale: Locale::EnUs,
            status: 502,
            failure: Failure::NotAnswering,
        })?);
        let no_logo = Look::new(Branding {
            logo_url: None,
            ..branding()
        });
        let html = render_waiting(&waiting(&no_logo))?;
        assert!(!html.contains("<img"));
        assert_no_urls(&html);
        Ok(())
    }

    #[test]
    fn everything_is_escaped() -> Result<(), askama::Error> {
        let evil = "<script>alert(1)</script>";
        let b = Look::new(Branding {
            title: evil.into(),
            logo_url: Some("\"><script>alert(1)</script>".into()),
            primary_color: "red;}</style><script>alert(1)</script>".into(),
            background_color: "#fff\"".into(),
            text_color: "expression(alert(1))".into(),
            heading: Some(evil.into()),
            message: Some(evil.into()),
            closed_heading: Some(evil.into()),
            closed_message: Some(evil.into()),
            language: PageLanguage::Fixed(Locale::EnUs),
        });
        let view = WaitingView {
            room_name: evil,
            status_url: "/s\"><script>alert(1)</script>",
            last_updated: "\"><script>alert(1)</script>".into(),
            ..waiting(&b)
        };
        let pages = [
            render_waiting(&view)?,
            render_closed(&ClosedView {
                look: &b,
                locale: Locale::EnUs,
                room_name: evil,
            })?,
            render_error(&ErrorView {
                look: &b,
                locale: Locale::EnUs,
                status: 504,
                failure: Failure::TooSlow,
            })?,
        ];
        for html in &pages {
            assert!(!html.contains(evil), "{html}");
            assert!(!html.contains("<script>alert"));
            assert!(html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"));
            // Invalid colours fall back to the defaults.
            assert!(
                html.contains(
                    "--primary:#1f4ed8;--on-primary:#ffffff;--bg:#f7f7f8;--text:#111827;"
                )
            );
        }
        assert_eq!(pages[0].matches("<script>").count(), 1);
        Ok(())
    }

    #[test]
    fn closed_page_renders_without_polling() -> Result<(), askama::Error> {
        let b = Look::new(branding());
        let html = render_closed(&ClosedView {
            look: &b,
            locale: Locale::EnUs,
            room_name: "sneaker-drop",
        })?;
        assert!(html.contains("<h1>Sold out</h1>"));
        assert!(html.contains("This drop is closed. Thank you for your interest."));
        assert!(!html.contains("<script"));
        assert!(!html.contains("refresh"));
        assert!(html.len() < 20 * 1024);
        Ok(())
    }

    #[test]
    fn error_page_renders_with_status() -> Result<(), askama::Error> {
        let b = Look::new(branding());
        let html = render_error(&ErrorView {
            look: &b,
            locale: Locale::EnUs,
            status: 502,
            failure: Failure::NotAnswering,
        })?;
        assert!(html.contains("Error 502"));
        assert!(html.contains("<h1>The shop is not answering right now</h1>"));
        assert!(html.contains("your place or your pass is kept."));
        assert!(html.contains(r#"<a class="btn" href="">Try again</a>"#));
        assert!(!html.contains("<script"));
        Ok(())
    }

    #[test]
    fn the_error_page_speaks_every_language_the_other_pages_speak() -> Result<(), askama::Error> {
        let b = Look::new(branding());
        let failures = [
            Failure::NotAnswering,
            Failure::TooSlow,
            Failure::Status,
            Failure::BadRequest,
            Failure::Limited {
                limit: Limit::TooFast,
                retry_after_secs: 1,
            },
            Failure::Limited {
                limit: Limit::TooManyLive,
                retry_after_secs: 30,
            },
            Failure::Limited {
                limit: Limit::PassRate,
                retry_after_secs: 5,
            },
            Failure::Shared,
            Failure::Blocked,
        ];
        for locale in Locale::ALL {
            let t = &locale.texts().failure;
            assert!(
                t.kicker.contains("{n}"),
                "{locale:?}: the status goes in the kicker"
            );
            for failure in failures {
                let html = render_error(&ErrorView {
                    look: &b,
                    locale,
                    status: 504,
                    failure,
                })?;
                let html_element = format!(
                    "<html lang=\"{}\" dir=\"{}\">",
                    locale.tag(),
                    locale.direction().attribute()
                );
                assert!(html.contains(&html_element), "{locale:?}");
                let kicker = t.kicker.replace("{n}", "504");
                assert!(html.contains(&kicker), "{locale:?} {failure:?}");
                assert!(html.contains(t.retry), "{locale:?}");
            }
            assert!(t.retry_in.other.contains("{n}"), "{locale:?}");
            if locale != Locale::EnUs {
                let english = &Locale::EnUs.texts().failure;
                assert_ne!(t.shared_message, english.shared_message, "{locale:?}");
                assert_ne!(t.pass_rate, english.pass_rate, "{locale:?}");
                assert_ne!(t.not_answering, english.not_answering, "{locale:?}");
                assert_ne!(t.too_slow_message, english.too_slow_message, "{locale:?}");
                assert_ne!(t.retry, english.retry, "{locale:?}");
                assert_ne!(t.blocked, english.blocked, "{locale:?}");
                assert_ne!(t.blocked_message, english.blocked_message, "{locale:?}");
            }
        }
        Ok(())
    }

    #[test]
    fn refresh_interval_is_at_least_one_second() -> Result<(), askama::Error> {
        let b = Look::new(branding());
        let view = WaitingView {
            refresh_interval_seconds: 0,
            ..waiting(&b)
        };
        assert!(render_waiting(&view)?.contains(r#"data-refresh="1""#));
        Ok(())
    }

    #[test]
    fn helpers() {
        assert_eq!(utc_clock("2026-11-29T20:01:02.000Z"), "20:01:02 UTC");
        assert_eq!(utc_clock("2026-11-29T20:01:02+00:00"), "20:01:02 UTC");
        assert_eq!(utc_clock("garbage"), "garbage");
        assert_eq!(utc_clock("é"), "é");
        assert_eq!(Rgb::parse("#abc"), Some(Rgb(0xaa, 0xbb, 0xcc)));
        assert_eq!(Rgb::parse("#1f4ED8"), Some(Rgb(0x1f, 0x4e, 0xd8)));
        assert_eq!(Rgb::parse("1f4ed8"), None);
        assert_eq!(Rgb::parse("#1f4ed"), None);
        assert_eq!(Rgb::parse("#+1+2+3"), None);
        assert!((Rgb(0, 0, 0).contrast(WHITE) - 21.0).abs() < 1e-9);
    }

    #[test]
    fn every_locale_renders_its_own_texts() -> Result<(), askama::Error> {
        let defaults = Look::new(Branding {
            heading: None,
            message: None,
            closed_heading: None,
            closed_message: None,
            ..branding()
        });
        for locale in Locale::ALL {
            let t = locale.texts();
            let view = WaitingView {
                locale,
                position: Some(12_345),
                queued: 23_456,
                ..waiting(&defaults)
            };
            let html = render_waiting(&view)?;
            let html_element = format!(
                "<html lang=\"{}\" dir=\"{}\">",
                locale.tag(),
                locale.direction().attribute()
            );
            assert!(html.contains(&html_element), "{locale:?}");
            let escaped = |text: &str| text.replace('\'', "&#39;");
            for text in [
                t.heading,
                t.message,
                t.number_before,
                t.number_after,
                t.estimated_wait,
                t.last_updated,
                t.refresh_note,
                t.live,
            ] {
                assert!(html.contains(&escaped(text)), "{locale:?}: {text}");
            }
            let place = format!(r#"<strong class="num">{}</strong>"#, locale.number(12_345));
            assert!(html.contains(&place), "{locale:?}");
            let total = locale.count(23_456, &t.total);
            assert!(html.contains(&escaped(&total)), "{locale:?}: {total}");
            let wait = locale.minutes(4);
            assert!(
                html.contains(&format!(">{wait}</dd>")),
                "{locale:?}: {wait}"
            );
            assert!(html.contains(&escaped(&t.footer.replace("{room}", "sneaker-drop"))));
            assert!(html.contains(&format!(r#""locale":"{}""#, locale.tag())));

            let unknown = render_waiting(&WaitingView {
                estimate: WaitEstimate::Unknown,
                ..view.clone()
            })?;
            assert!(unknown.contains(&escaped(t.not_known)), "{locale:?}");
            assert!(unknown.contains(&escaped(t.wait_note)), "{locale:?}");

            let closed = render_closed(&ClosedView {
                look: &defaults,
                locale,
                room_name: "sneaker-drop",
            })?;
            assert!(
                closed.contains(&format!("<h1>{}</h1>", t.closed_heading)),
                "{locale:?}"
            );
            assert!(closed.contains(&escaped(t.closed_message)), "{locale:?}");
            assert!(closed.contains(&html_element), "{locale:?}");

            let challenge = render_challenge(&ChallengeView {
                look: &defaults,
                locale,
                room_name: "sneaker-drop",
                message: t.proof_message,
                widget: "",
            })?;
            assert!(challenge.contains(&html_element), "{locale:?}");
            assert!(
                challenge.contains(&escaped(t.challenge_heading)),
                "{locale:?}"
            );
            assert!(challenge.contains(&escaped(t.proof_message)), "{locale:?}");
            assert!(
                challenge.contains(&escaped(t.challenge_retry)),
                "{locale:?}"
            );
        }
        Ok(())
    }

    #[test]
    fn texts_set_by_the_operator_win_in_every_language() -> Result<(), askama::Error> {
        let b = Look::new(Branding {
            heading: Some("Hold tight".into()),
            closed_message: Some("Back next week".into()),
            ..branding()
        });
        let html = render_waiting(&WaitingView {
            locale: Locale::DeDe,
            ..waiting(&b)
        })?;
        assert!(html.contains("<h1>Hold tight</h1>"));
        assert!(html.contains("Sie sind Nummer"));
        let closed = render_closed(&ClosedView {
            look: &b,
            locale: Locale::JaJp,
            room_name: "r",
        })?;
        assert!(closed.contains("Back next week"));
        assert!(closed.contains("<h1>Sold out</h1>"));
        assert!(closed.contains("待合室：r"));
        Ok(())
    }

    #[test]
    fn colours_stay_readable() {
        // Yellow brand on white, text colour that is barely visible.
        let t = Look::new(Branding {
            primary_color: "#facc15".into(),
            background_color: "#ffffff".into(),
            text_color: "#dddddd".into(),
            ..branding()
        })
        .theme;

        let card = get(&t.card);
        assert_eq!(t.text, "#111827");
        assert_eq!(t.on_primary, "#111827");
        for c in [&t.text, &t.muted, &t.accent] {
            assert!(get(c).contrast(card) >= MIN_TEXT_CONTRAST, "{c}");
            assert!(get(c).contrast(get(&t.panel)) >= MIN_TEXT_CONTRAST, "{c}");
        }

        // Dark theme.
        let d = Theme::new(&Branding {
            primary_color: "#60a5fa".into(),
            background_color: "#0b1020".into(),
            text_color: "#f3f4f6".into(),
            ..branding()
        });
        assert_eq!(d.scheme, "dark");
        assert_eq!(d.text, "#f3f4f6");
        for c in [&d.text, &d.muted, &d.accent] {
            assert!(get(c).contrast(get(&d.card)) >= MIN_TEXT_CONTRAST, "{c}");
        }

        // The default blue carries white text.
        let t = Theme::new(&branding());
        assert_eq!(t.on_primary, "#ffffff");
        assert!(get(&t.primary).contrast(WHITE) >= MIN_TEXT_CONTRAST);
    }

    #[test]
    fn a_prequeue_shows_the_countdown_and_the_event_texts() {
        let b = Look::new(branding());
        let html = render_waiting(&WaitingView {
            position: None,
            countdown: Some(Countdown {
                starts_at: 1_796_119_200_000,
                now: 1_796_119_200_000 - 3_909_000,
                shuffled: true,
            }),
            heading: Some("Air Max drop"),
            message: Some("Opens at <10:00>"),
            ..waiting(&b)
        })
        .unwrap_or_default();
        assert!(html.contains("<h1>Air Max drop</h1>"), "{html}");
        assert!(!html.contains("<10:00>"), "{html}");
        assert!(html.contains(">1:05:09<"));
        assert!(html.contains("datetime=\"2026-12-01T10:00:00.000Z\""));
        assert!(html.contains(Locale::EnUs.texts().prequeue_shuffle_note));
        let plain = render_waiting(&waiting(&b)).unwrap_or_default();
        assert!(!plain.contains("id=\"wr-countdown\""));
        assert_eq!(clock_text(59_001), "1:00");
        assert_eq!(clock_text(0), "0:00");
    }

    /// An Arabic page writes its countdown, clock and progress in the digits of its numbers.
    #[test]
    fn a_page_writes_every_number_in_its_own_digits() {
        let b = Look::new(branding());
        let arabic = |countdown| {
            render_waiting(&WaitingView {
                locale: Locale::ArEg,
                countdown,
                position: if countdown.is_some() { None } else { Some(2) },
                initial_position: Some(4),
                ..waiting(&b)
            })
            .unwrap_or_default()
        };
        let prequeue = arabic(Some(Countdown {
            starts_at: 1_796_119_200_000,
            now: 1_796_119_200_000 - 3_909_000,
            shuffled: false,
        }));
        assert!(prequeue.contains(">١:٠٥:٠٩<"), "{prequeue}");
        let waiting_page = arabic(None);
        assert!(waiting_page.contains("aria-valuetext=\"٥٠% من الطريق إلى المقدمة\""));
        assert!(waiting_page.contains("<strong class=\"num\">٢</strong>"));
        assert!(waiting_page.contains(" UTC</time>"), "{waiting_page}");
        assert!(
            !waiting_page.contains(":02 UTC"),
            "the clock in Arabic-Indic digits"
        );
    }
}
