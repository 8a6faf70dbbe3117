//! `[page] template`: a Cloudflare-style Mustache page (Cloudflare's `custom_page_html`) that the
//! proxy renders with Cloudflare's variables plus ours, so one file gives the same page at the
//! edge and self-hosted. The config reads and checks it (`config::model::PageTemplate`); it is
//! compiled once, when the server is assembled; a request only renders it.

use ramhorns::{Content, Template};

use crate::config::model::PageTemplate;
use crate::respond::status::{ChallengeBody, ProofOfWorkBody, StatusBody};

/// A compiled page template, shared by every request.
#[derive(Debug)]
pub struct CustomPage {
    template: Template<'static>,
}

impl CustomPage {
    /// Compiles a template the config checked: ramhorns refuses nothing the check lets through,
    /// but its word is the last.
    pub fn compile(template: &PageTemplate) -> Result<CustomPage, ramhorns::Error> {
        let template = Template::new(template.source.clone())?;
        Ok(CustomPage { template })
    }

    pub fn render(&self, variables: &PageVariables) -> String {
        self.template.render(variables)
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
    /// The proof of work's ready solver (raw HTML, `{{{proofOfWork}}}`) and its parts, for a
    /// template with a solver of its own: empty unless a proof is due.
    #[ramhorns(rename = "proofOfWork")]
    proof_of_work: &'a str,
    #[ramhorns(rename = "proofOfWorkSeed")]
    proof_of_work_seed: &'a str,
    #[ramhorns(rename = "proofOfWorkDifficultyBits")]
    proof_of_work_difficulty_bits: Option<u8>,
    #[ramhorns(rename = "proofOfWorkExpires")]
    proof_of_work_expires: &'a str,
    #[ramhorns(rename = "proofOfWorkUrl")]
    proof_of_work_url: &'a str,
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
        let (turnstile, proof) = match &status.waitroom.challenge {
            Some(ChallengeBody::Turnstile(t)) => (&*t.widget, None),
            Some(ChallengeBody::ProofOfWork(p)) => ("", Some(p)),
            None => ("", None),
        };
        let proof_text = |f: fn(&ProofOfWorkBody) -> &str| proof.map_or("", f);
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
            turnstile,
            proof_of_work: proof_text(|p| &p.widget),
            proof_of_work_seed: proof_text(|p| &p.seed),
            proof_of_work_difficulty_bits: proof.map(|p| p.difficulty_bits),
            proof_of_work_expires: proof_text(|p| &p.expires),
            proof_of_work_url: proof_text(|p| &p.url),
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
    use crate::config::model::page_template::{VARIABLES, check};
    use crate::core::estimate::WaitEstimate;
    use crate::gate::Shown;

    fn status(estimate: WaitEstimate, queued: u64) -> StatusBody {
        let section: RoomSection = toml::from_str(
            "id = \"r\"\ntotal_active_users = 5\nnew_users_per_minute = 5\nname = \"Drop\"",
        )
        .unwrap();
        let settings = RoomSettings::from_section(&section).unwrap();
        let standing = Shown::Waiting {
            position: Some(3),
            queued,
            estimate,
        };
        StatusBody::new(&settings, standing, 1_780_000_000_000)
    }

    /// A template as the config checks it, then compiled: the warnings and the page.
    fn compile(source: &str) -> Result<(CustomPage, Vec<String>), String> {
        let warnings = check(source).map_err(|e| e.to_string())?;
        let template = PageTemplate {
            path: "page.html".into(),
            source: source.to_owned(),
        };
        let page = CustomPage::compile(&template).map_err(|e| e.to_string())?;
        Ok((page, warnings))
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
            if v != "turnstile" && !v.starts_with("proofOfWork") {
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
        body.waitroom.challenge = Some(ChallengeBody::Turnstile(crate::turnstile::Challenge {
            provider: "turnstile",
            site_key: "k".into(),
            mode: "invisible",
            url: "/__waitroom/turnstile".into(),
            field: "cf-turnstile-response",
            widget: "<div class=\"cf-turnstile\"></div>".into(),
        }));
        assert_eq!(
            page.render(&PageVariables::new(&body, None, "r")),
            "[<div class=\"cf-turnstile\"></div>]."
        );
    }
}
