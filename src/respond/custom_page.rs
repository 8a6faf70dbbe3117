//! `[page] template`: a Cloudflare-style Mustache page (Cloudflare's `custom_page_html`) that the
//! proxy renders with Cloudflare's variables plus ours, so one file gives the same page at the
//! edge and self-hosted. The template is compiled once, when the config is loaded; a request only
//! renders it.
//!
//! Rendering is ramhorns'. Before handing the source to it, `check` walks the tags once to report
//! mistakes with their line (ramhorns' own errors carry none) and to warn about names nobody
//! fills, which Mustache would silently render empty.

use ramhorns::{Content, Template};

use crate::respond::status::StatusBody;

/// Every name the proxy fills: Cloudflare's cfWaitingRoom fields, the starter template's derived
/// values, `turnstile` and `infiniteQueue`, then ours (empty at Cloudflare's edge).
pub const VARIABLES: [&str; 32] = [
    "inWaitingRoom",
    "waitTimeKnown",
    "waitTime",
    "waitTime25Percentile",
    "waitTime50Percentile",
    "waitTime75Percentile",
    "waitTimeFormatted",
    "queueIsFull",
    "queueAll",
    "lastUpdated",
    "refreshIntervalSeconds",
    "queueingMethod",
    "isFIFOQueue",
    "isRandomQueue",
    "isPassthroughQueue",
    "isRejectQueue",
    "isEventActive",
    "isEventPrequeueing",
    "timeUntilEventStart",
    "timeUntilEventStartFormatted",
    "timeUntilEventEnd",
    "timeUntilEventEndFormatted",
    "shuffleAtEventStart",
    "waitTimeHours",
    "waitTimeHourMinutes",
    "timeUntilEventStartHours",
    "timeUntilEventStartHourMinutes",
    "turnstile",
    "infiniteQueue",
    "position",
    "queued",
    "roomName",
];

/// ramhorns keeps at most this many sections open at once.
const MAX_NESTING: usize = 16;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    #[error("line {line}: {reason}")]
    At { line: usize, reason: String },
    #[error("{0}")]
    Engine(String),
}

fn at(line: usize, reason: impl Into<String>) -> TemplateError {
    TemplateError::At {
        line,
        reason: reason.into(),
    }
}

/// A compiled page template, shared by every request.
#[derive(Debug)]
pub struct CustomPage {
    template: Template<'static>,
}

impl CustomPage {
    /// Compiles `source`; the strings are warnings (line and name of tags nobody fills).
    pub fn compile(source: String) -> Result<(CustomPage, Vec<String>), TemplateError> {
        let warnings = check(&source)?;
        let template = Template::new(source).map_err(|e| TemplateError::Engine(e.to_string()))?;
        Ok((CustomPage { template }, warnings))
    }

    pub fn render(&self, variables: &PageVariables) -> String {
        self.template.render(variables)
    }
}

/// Walks the tags as ramhorns reads them: `{{name}}`, `{{{raw}}}`, `{{&raw}}`, `{{#section}}`,
/// `{{^inverted}}`, `{{/close}}`, `{{! comment }}`. Partials and delimiter changes are refused:
/// Cloudflare's custom pages have neither.
fn check(source: &str) -> Result<Vec<String>, TemplateError> {
    let mut warnings = Vec::new();
    let mut open: Vec<(&str, usize)> = Vec::new();
    let mut rest = source;
    let mut line = 1;
    while let Some(start) = rest.find("{{") {
        line += rest[..start].matches('\n').count();
        let after = &rest[start + 2..];
        // The character after "{{" says what the tag is; a plain variable has none.
        let (sigil, closing) = match after.chars().next() {
            Some('{') => (Some('{'), "}}}"),
            Some(c @ ('&' | '#' | '^' | '/' | '!' | '>' | '=')) => (Some(c), "}}"),
            _ => (None, "}}"),
        };
        let body_start = usize::from(sigil.is_some());
        let Some(end) = after[body_start..].find(closing) else {
            return Err(at(
                line,
                format!("a tag opened here has no closing {closing:?}"),
            ));
        };
        let inner = &after[body_start..body_start + end];
        let tag_line = line;
        line += inner.matches('\n').count();
        rest = &after[body_start + end + closing.len()..];
        // ramhorns reads a tag as space-separated words ending at the first "}}".
        if inner.contains('}') {
            return Err(at(tag_line, "a '}' inside a tag (comments included)"));
        }
        if sigil == Some('!') {
            continue;
        }
        let name = inner.trim_matches(' ');
        match sigil {
            Some('>') => return Err(at(tag_line, "partials ({{>name}}) are not supported")),
            Some('=') => {
                return Err(at(
                    tag_line,
                    "changing delimiters ({{=...=}}) is not supported",
                ));
            }
            _ if name.is_empty() => return Err(at(tag_line, "an empty tag {{}}")),
            _ if name.contains(char::is_whitespace) => {
                return Err(at(
                    tag_line,
                    format!("a tag holds one name padded with spaces, not {{{{{inner}}}}}"),
                ));
            }
            Some('#' | '^') => {
                if open.len() >= MAX_NESTING {
                    return Err(at(
                        tag_line,
                        format!("sections nested deeper than {MAX_NESTING}"),
                    ));
                }
                open.push((name, tag_line));
            }
            Some('/') => {
                match open.pop() {
                    Some((opened, _)) if opened == name => {}
                    Some((opened, opened_line)) => {
                        return Err(at(
                            tag_line,
                            format!(
                                "{{{{/{name}}}}} closes {{{{#{opened}}}}} from line {opened_line}"
                            ),
                        ));
                    }
                    None => {
                        return Err(at(
                            tag_line,
                            format!("{{{{/{name}}}}} closes no open section"),
                        ));
                    }
                }
                continue;
            }
            _ => {}
        }
        if !VARIABLES.contains(&name) {
            warnings.push(format!(
                "line {tag_line}: {{{{{name}}}}} is not a variable the proxy fills (it renders empty)"
            ));
        }
    }
    match open.pop() {
        Some((name, line)) => Err(at(line, format!("{{{{#{name}}}}} is never closed"))),
        None => Ok(warnings),
    }
}

/// The values one waiting page is rendered with; field names are Cloudflare's.
#[derive(Content)]
pub struct PageVariables<'a> {
    #[ramhorns(rename = "inWaitingRoom")]
    in_waiting_room: bool,
    #[ramhorns(rename = "waitTimeKnown")]
    wait_time_known: bool,
    #[ramhorns(rename = "waitTime")]
    wait_time: u64,
    #[ramhorns(rename = "waitTime25Percentile")]
    wait_time_25_percentile: u64,
    #[ramhorns(rename = "waitTime50Percentile")]
    wait_time_50_percentile: u64,
    #[ramhorns(rename = "waitTime75Percentile")]
    wait_time_75_percentile: u64,
    #[ramhorns(rename = "waitTimeFormatted")]
    wait_time_formatted: &'a str,
    #[ramhorns(rename = "queueIsFull")]
    queue_is_full: bool,
    #[ramhorns(rename = "queueAll")]
    queue_all: bool,
    #[ramhorns(rename = "lastUpdated")]
    last_updated: &'a str,
    #[ramhorns(rename = "refreshIntervalSeconds")]
    refresh_interval_seconds: u64,
    #[ramhorns(rename = "queueingMethod")]
    queueing_method: &'a str,
    #[ramhorns(rename = "isFIFOQueue")]
    is_fifo_queue: bool,
    #[ramhorns(rename = "isRandomQueue")]
    is_random_queue: bool,
    #[ramhorns(rename = "isPassthroughQueue")]
    is_passthrough_queue: bool,
    #[ramhorns(rename = "isRejectQueue")]
    is_reject_queue: bool,
    #[ramhorns(rename = "isEventActive")]
    is_event_active: bool,
    #[ramhorns(rename = "isEventPrequeueing")]
    is_event_prequeueing: bool,
    #[ramhorns(rename = "timeUntilEventStart")]
    time_until_event_start: u64,
    #[ramhorns(rename = "timeUntilEventStartFormatted")]
    time_until_event_start_formatted: &'a str,
    #[ramhorns(rename = "timeUntilEventEnd")]
    time_until_event_end: u64,
    #[ramhorns(rename = "timeUntilEventEndFormatted")]
    time_until_event_end_formatted: &'a str,
    #[ramhorns(rename = "shuffleAtEventStart")]
    shuffle_at_event_start: bool,
    #[ramhorns(rename = "waitTimeHours")]
    wait_time_hours: u64,
    #[ramhorns(rename = "waitTimeHourMinutes")]
    wait_time_hour_minutes: u64,
    #[ramhorns(rename = "timeUntilEventStartHours")]
    time_until_event_start_hours: u64,
    #[ramhorns(rename = "timeUntilEventStartHourMinutes")]
    time_until_event_start_hour_minutes: u64,
    /// The bot challenge widget (raw HTML, `{{{turnstile}}}`): empty unless the visitor must pass
    /// the challenge before it gets a place.
    turnstile: &'a str,
    /// Always false: a parked visitor's page must look like anyone's.
    #[ramhorns(rename = "infiniteQueue")]
    infinite_queue: bool,
    /// Ours: the exact place, None under random queueing (as on the built-in page).
    position: Option<u64>,
    queued: u64,
    #[ramhorns(rename = "roomName")]
    room_name: &'a str,
}

impl<'a> PageVariables<'a> {
    /// Cloudflare's values as in the JSON (its English wording included), plus ours.
    pub fn new(status: &'a StatusBody, position: Option<u64>, room_name: &'a str) -> Self {
        let cf = &status.cf;
        PageVariables {
            in_waiting_room: cf.in_waiting_room,
            wait_time_known: cf.wait_time_known,
            wait_time: cf.wait_time,
            wait_time_25_percentile: cf.wait_time_25_percentile,
            wait_time_50_percentile: cf.wait_time_50_percentile,
            wait_time_75_percentile: cf.wait_time_75_percentile,
            wait_time_formatted: &cf.wait_time_formatted,
            queue_is_full: cf.queue_is_full,
            queue_all: cf.queue_all,
            last_updated: &cf.last_updated,
            refresh_interval_seconds: cf.refresh_interval_seconds,
            queueing_method: cf.queueing_method,
            is_fifo_queue: cf.is_fifo_queue,
            is_random_queue: cf.is_random_queue,
            is_passthrough_queue: cf.is_passthrough_queue,
            is_reject_queue: cf.is_reject_queue,
            is_event_active: cf.is_event_active,
            is_event_prequeueing: cf.is_event_prequeueing,
            time_until_event_start: cf.time_until_event_start,
            time_until_event_start_formatted: &cf.time_until_event_start_formatted,
            time_until_event_end: cf.time_until_event_end,
            time_until_event_end_formatted: &cf.time_until_event_end_formatted,
            shuffle_at_event_start: cf.shuffle_at_event_start,
            wait_time_hours: cf.wait_time / 60,
            wait_time_hour_minutes: cf.wait_time % 60,
            time_until_event_start_hours: cf.time_until_event_start / 60,
            time_until_event_start_hour_minutes: cf.time_until_event_start % 60,
            turnstile: status.waitroom.challenge.as_ref().map_or("", |c| &c.widget),
            infinite_queue: false,
            position,
            queued: status.waitroom.queued,
            room_name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::RoomSettings;
    use crate::config::file::RoomSection;
    use crate::core::estimate::WaitEstimate;
    use crate::respond::status::Standing;

    fn status(estimate: WaitEstimate, queued: u64) -> StatusBody {
        let section: RoomSection = toml::from_str(
            "id = \"r\"\ntotal_active_users = 5\nnew_users_per_minute = 5\nname = \"Drop\"",
        )
        .unwrap();
        let settings = RoomSettings::from_section(&section).unwrap();
        let standing = Standing::Waiting {
            position: Some(3),
            queued,
            estimate,
        };
        StatusBody::new(&settings, standing, 1_780_000_000_000)
    }

    fn compile(source: &str) -> Result<(CustomPage, Vec<String>), TemplateError> {
        CustomPage::compile(source.to_owned())
    }

    #[test]
    fn every_variable_is_filled() {
        let source: String = VARIABLES
            .iter()
            .map(|v| format!("{v}=[{{{{{v}}}}}]\n"))
            .collect();
        let (page, warnings) = compile(&source).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let body = status(WaitEstimate::Exact { seconds: 3_900 }, 40);
        let html = page.render(&PageVariables::new(&body, Some(3), "Drop <1>"));
        for v in VARIABLES {
            let line = html
                .lines()
                .find(|l| l.starts_with(&format!("{v}=")))
                .unwrap_or_else(|| panic!("{v} missing in {html}"));
            if v != "turnstile" {
                assert!(!line.ends_with("=[]"), "{v} is empty");
            }
        }
        for expected in [
            "waitTime=[65]",
            "waitTimeHours=[1]",
            "waitTimeHourMinutes=[5]",
            "waitTimeFormatted=[65 minutes]",
            "isFIFOQueue=[true]",
            "isRandomQueue=[false]",
            "queueingMethod=[fifo]",
            "position=[3]",
            "queued=[40]",
            "roomName=[Drop &lt;1&gt;]",
            "timeUntilEventStartFormatted=[unavailable]",
            "lastUpdated=[2026-05-28T",
        ] {
            assert!(html.contains(expected), "{expected} in {html}");
        }
    }

    #[test]
    fn sections_follow_cloudflares_truthiness() {
        let (page, _) = compile(
            "{{#waitTimeKnown}}known{{/waitTimeKnown}}{{^waitTimeKnown}}unknown{{/waitTimeKnown}}|\
             {{#position}}#{{position}}{{/position}}{{^position}}no place{{/position}}|\
             {{#refreshIntervalSeconds}}every {{refreshIntervalSeconds}}s{{/refreshIntervalSeconds}}|\
             [{{{turnstile}}}]",
        )
        .unwrap();
        let known = status(WaitEstimate::Exact { seconds: 60 }, 1);
        assert_eq!(
            page.render(&PageVariables::new(&known, Some(7), "r")),
            "known|#7|every 20s|[]"
        );
        let unknown = status(WaitEstimate::Unknown, 1);
        assert_eq!(
            page.render(&PageVariables::new(&unknown, None, "r")),
            "unknown|no place|every 20s|[]"
        );
    }

    #[test]
    fn turnstile_is_the_widget_only_while_a_challenge_is_due() {
        let (page, _) = compile("[{{{turnstile}}}]{{^infiniteQueue}}.{{/infiniteQueue}}").unwrap();
        let mut body = status(WaitEstimate::Unknown, 1);
        assert_eq!(page.render(&PageVariables::new(&body, None, "r")), "[].");
        body.waitroom.challenge = Some(crate::respond::status::Challenge {
            provider: "turnstile",
            site_key: "k".into(),
            mode: "invisible",
            url: "/__waitroom/turnstile".into(),
            field: "cf-turnstile-response",
            widget: "<div class=\"cf-turnstile\"></div>".into(),
        });
        assert_eq!(
            page.render(&PageVariables::new(&body, None, "r")),
            "[<div class=\"cf-turnstile\"></div>]."
        );
    }

    #[test]
    fn mistakes_are_reported_with_their_line() {
        let cases = [
            (
                "a\n{{#waitTimeKnown}}\nb",
                2,
                "{{#waitTimeKnown}} is never closed",
            ),
            (
                "a\nb\n{{/queueAll}}",
                3,
                "{{/queueAll}} closes no open section",
            ),
            (
                "{{#queueAll}}\n{{/queueIsFull}}",
                2,
                "{{/queueIsFull}} closes {{#queueAll}} from line 1",
            ),
            ("\n\n\n{{waitTime", 4, "no closing \"}}\""),
            ("{{{turnstile}}", 1, "no closing \"}}}\""),
            ("x\n{{> header}}", 2, "partials"),
            ("{{=<% %>=}}", 1, "delimiters"),
            ("{{}}", 1, "empty tag"),
            ("\n{{wait time}}", 2, "one name"),
            ("{{waitTime\n}}", 1, "one name"),
            ("\n{{! {x} }}", 2, "a '}' inside a tag"),
        ];
        for (source, line, needle) in cases {
            match compile(source) {
                Err(TemplateError::At { line: got, reason }) => {
                    assert_eq!(got, line, "{source:?}: {reason}");
                    assert!(reason.contains(needle), "{source:?}: {reason}");
                }
                other => panic!("{source:?} gave {other:?}"),
            }
        }
        let deep = "{{#queueAll}}".repeat(17) + &"{{/queueAll}}".repeat(17);
        assert!(compile(&deep).is_err());
    }

    #[test]
    fn unknown_names_warn_and_comments_do_not() {
        let (_, warnings) = compile(
            "{{! a comment\n about waitTime }}\n\n{{waittime}}\n{{#isFifoQueue}}{{/isFifoQueue}}",
        )
        .unwrap();
        assert_eq!(
            warnings,
            [
                "line 4: {{waittime}} is not a variable the proxy fills (it renders empty)",
                "line 5: {{isFifoQueue}} is not a variable the proxy fills (it renders empty)",
            ]
        );
    }
}
