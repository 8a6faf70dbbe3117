//! `GET /admin/report`: the drop report, from each room's history of minutes (`core::history`,
//! fed by the admission loop): per room, over everything the history holds and over each of the
//! room's scheduled events, what happened (admitted, joined, abandoned), how long the line took,
//! the order kept, the origin's health, and a timeline by minute. JSON, CSV (one row per minute
//! per room) or a self-contained HTML page to send to the shop's owner.
//!
//! Scope: the line's figures (inside, waiting, admitted, joined, abandoned) are the store's
//! counts, the whole room's on every instance; the rest (waits, order, origin, revocations,
//! challenges) each instance counts for itself and publishes to the store (its shares,
//! `DropHistory::publish_shares`): the report adds every instance's to its own. The JSON says which
//! is which, and whether the other instances' shares could be read.

use askama::Template;
use serde::Serialize;

use super::RoomAdmin;
use crate::clock::{Millis, rfc3339_ms};
use crate::core::history::{History, MINUTE_MS, Minute, Summary};
use crate::observe::ORIGIN_BOUNDS;
use crate::respond::reply::Reply;

/// The figures that are the whole room's (the store's counts), on every instance alike.
const ROOM_WIDE: &[&str] = &[
    "admitted",
    "joined",
    "abandoned",
    "peak_inside",
    "peak_waiting",
    "timeline",
];
/// The figures each instance counts for itself: every instance's shares added.
const ADDED_UP: &[&str] = &["wait", "order_tau", "origin", "revoked", "challenges"];

const CSV_HEADER: &str =
    "room,minute,inside,waiting,admitted,joined,abandoned,origin_requests,origin_errors";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Csv,
    Html,
}

/// What `?format=` and `?event=` asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub format: Format,
    pub event: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("format {0:?} is not one of json, csv, html")]
    Format(String),
    #[error("unknown parameter {0:?}: the report takes format and event")]
    Parameter(String),
}

impl Query {
    pub fn parse(query: Option<&str>) -> Result<Self, QueryError> {
        let mut parsed = Query {
            format: Format::Json,
            event: None,
        };
        for (name, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            match name.as_ref() {
                "format" => {
                    parsed.format = match value.as_ref() {
                        "json" => Format::Json,
                        "csv" => Format::Csv,
                        "html" => Format::Html,
                        other => return Err(QueryError::Format(other.to_owned())),
                    }
                }
                "event" => parsed.event = Some(value.into_owned()),
                other => return Err(QueryError::Parameter(other.to_owned())),
            }
        }
        Ok(parsed)
    }
}

/// A span of minutes: `[from, until)`.
#[derive(Debug, Clone, Copy)]
struct Span {
    from: Millis,
    until: Millis,
}

impl Span {
    const EVERYTHING: Span = Span {
        from: Millis::MIN,
        until: Millis::MAX,
    };

    /// The minutes an event's window touches, from its pre-queue (or start) to its end.
    fn of_event(opens: Millis, ends: Millis) -> Span {
        Span {
            from: opens - opens.rem_euclid(MINUTE_MS),
            until: ends,
        }
    }
}

#[derive(Serialize)]
struct Point {
    minute: String,
    inside: u64,
    waiting: u64,
    admitted: u64,
    joined: u64,
}

#[derive(Serialize)]
struct Wait {
    /// Visitors admitted from the line by this instance, whose waits these are.
    admitted_from_line: u64,
    p50: Option<f64>,
    p95: Option<f64>,
    max: Option<f64>,
}

#[derive(Serialize)]
struct Origin {
    requests: u64,
    errors: u64,
    error_rate: Option<f64>,
    p95_seconds: Option<f64>,
}

#[derive(Serialize)]
struct Revoked {
    ended: u64,
    shared: u64,
}

#[derive(Serialize)]
struct Challenges {
    passed: u64,
    failed: u64,
}

#[derive(Serialize)]
struct Figures {
    /// The first and the end of the minutes recorded in the span; None when there are none.
    from: Option<String>,
    until: Option<String>,
    minutes: usize,
    admitted: u64,
    joined: u64,
    abandoned: u64,
    peak_inside: u64,
    peak_waiting: u64,
    wait: Wait,
    order_tau: Option<f64>,
    origin: Origin,
    revoked: Revoked,
    challenges: Challenges,
    timeline: Vec<Point>,
}

/// A wait in seconds, from its milliseconds.
fn seconds(ms: u32) -> f64 {
    f64::from(ms) / 1000.0
}

/// Seconds to the millisecond: quantiles interpolated within a bucket claim no more.
fn to_ms(seconds: f64) -> f64 {
    (seconds * 1000.0).round() / 1000.0
}

fn rounded(value: f64) -> f64 {
    (value * 10_000.0).round() / 10_000.0
}

impl Figures {
    fn of(history: &History, span: Span) -> Self {
        let summary: Summary = history.summary(span.from, span.until);
        let minutes: Vec<&Minute> = history.minutes(span.from, span.until).collect();
        let added = summary.added;
        let own = added.own;
        Figures {
            from: minutes.first().map(|m| rfc3339_ms(m.start)),
            until: minutes.last().map(|m| rfc3339_ms(m.start + MINUTE_MS)),
            minutes: summary.minutes,
            admitted: added.admitted,
            joined: added.joined,
            abandoned: added.abandoned,
            peak_inside: summary.peak_inside,
            peak_waiting: summary.peak_waiting,
            wait: Wait {
                admitted_from_line: summary.waits.len() as u64,
                p50: summary.wait_quantile(0.5).map(seconds),
                p95: summary.wait_quantile(0.95).map(seconds),
                max: summary.longest_wait_ms().map(seconds),
            },
            order_tau: own.order_tau().map(rounded),
            origin: Origin {
                requests: own.origin_requests,
                errors: own.origin_errors,
                error_rate: own.origin_error_rate().map(rounded),
                p95_seconds: summary
                    .origin_latency
                    .quantile(ORIGIN_BOUNDS, 0.95)
                    .map(to_ms),
            },
            revoked: Revoked {
                ended: own.revoked_ended,
                shared: own.revoked_shared,
            },
            challenges: Challenges {
                passed: own.challenges_passed,
                failed: own.challenges_failed,
            },
            timeline: minutes
                .iter()
                .map(|m| Point {
                    minute: rfc3339_ms(m.start),
                    inside: m.inside,
                    waiting: m.waiting,
                    admitted: m.added.admitted,
                    joined: m.added.joined,
                })
                .collect(),
        }
    }
}

#[derive(Serialize)]
struct EventReport {
    event: String,
    /// The event's window as scheduled.
    opens: String,
    ends: String,
    suspended: bool,
    #[serde(flatten)]
    figures: Figures,
}

#[derive(Serialize)]
struct RoomReport {
    room: String,
    name: String,
    /// Whether the other instances' shares are in the figures `scope.instances` names: false
    /// when the store did not answer (then they are this instance's alone, and `shares_error`
    /// says why).
    shares_merged: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    shares_error: Option<String>,
    /// Everything the history holds (a day at most), or the event's window with `?event=`.
    #[serde(flatten)]
    figures: Figures,
    events: Vec<EventReport>,
    /// The span of `figures`: the CSV's rows.
    #[serde(skip)]
    span: Span,
}

#[derive(Serialize)]
struct Scope {
    /// The store's counts.
    room: &'static [&'static str],
    /// Every instance's shares added.
    instances: &'static [&'static str],
}

#[derive(Serialize)]
struct Report {
    generated_at: String,
    /// The instance that made the report (its own shares are its freshest).
    instance: String,
    scope: Scope,
    rooms: Vec<RoomReport>,
}

/// A room's minutes as the report reads them: this instance's history with the other
/// instances' shares added, or its own alone when the store could not give them.
struct Merged {
    history: History,
    error: Option<String>,
}

/// The room's history with every other instance's published shares of its minutes added. The
/// history's lock is not held across the store's call.
async fn merged(admin: &RoomAdmin, instance: &str) -> Merged {
    let minutes: Vec<Millis> = admin
        .room_loop()
        .history()
        .minutes(Millis::MIN, Millis::MAX)
        .map(|m| m.start)
        .collect();
    let others = admin.room().store.shares_of(&minutes, instance).await;
    let history = admin.room_loop().history();
    match others {
        Ok(others) => Merged {
            history: history.with_shares(&others),
            error: None,
        },
        Err(e) => Merged {
            history: history.with_shares(&[]),
            error: Some(format!(
                "the other instances' shares could not be read: {e}; these figures are this \
                 instance's alone"
            )),
        },
    }
}

/// One room's report, or None when `event` names none of its events.
fn room_report(admin: &RoomAdmin, merged: &Merged, event: Option<&str>) -> Option<RoomReport> {
    let settings = admin.room().settings.configured();
    let history = &merged.history;
    let mut span = Span::EVERYTHING;
    let mut events = Vec::new();
    for scheduled in &settings.events {
        if event.is_some_and(|name| name != scheduled.name) {
            continue;
        }
        let times = scheduled.times;
        let window = Span::of_event(times.opens_ms(), times.end_ms);
        if event.is_some() {
            span = window;
        }
        events.push(EventReport {
            event: scheduled.name.clone(),
            opens: rfc3339_ms(times.opens_ms()),
            ends: rfc3339_ms(times.end_ms),
            suspended: scheduled.suspended,
            figures: Figures::of(history, window),
        });
    }
    if event.is_some() && events.is_empty() {
        return None;
    }
    Some(RoomReport {
        room: admin.id().to_owned(),
        name: settings.name.clone(),
        shares_merged: merged.error.is_none(),
        shares_error: merged.error.clone(),
        figures: Figures::of(history, span),
        events,
        span,
    })
}

/// The report as asked: 404 when `?event=` names no room's event, 400 for a bad query.
pub async fn report(
    rooms: &[RoomAdmin],
    instance: &str,
    now: Millis,
    query: Option<&str>,
) -> Reply {
    let query = match Query::parse(query) {
        Ok(query) => query,
        Err(e) => return super::error(400, e.to_string()),
    };
    let mut histories = Vec::with_capacity(rooms.len());
    for room in rooms {
        histories.push(merged(room, instance).await);
    }
    let reports: Vec<RoomReport> = rooms
        .iter()
        .zip(&histories)
        .filter_map(|(room, merged)| room_report(room, merged, query.event.as_deref()))
        .collect();
    if let Some(event) = &query.event
        && reports.is_empty()
    {
        return super::error(404, format!("no room has an event named {event:?}"));
    }
    let report = Report {
        generated_at: rfc3339_ms(now),
        instance: instance.to_owned(),
        scope: Scope {
            room: ROOM_WIDE,
            instances: ADDED_UP,
        },
        rooms: reports,
    };
    match query.format {
        Format::Json => Reply::json(200, &report),
        Format::Csv => Reply::new(
            200,
            "text/csv; charset=utf-8",
            csv(rooms, &histories, &report),
        ),
        Format::Html => html(&report, now),
    }
}

/// A CSV field, quoted when it holds what would split it.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// One row per minute per room, over the report's span (the event's with `?event=`).
fn csv(rooms: &[RoomAdmin], histories: &[Merged], report: &Report) -> String {
    let mut out = format!("{CSV_HEADER}\n");
    for reported in &report.rooms {
        let Some(merged) = rooms
            .iter()
            .zip(histories)
            .find_map(|(r, merged)| (r.id() == reported.room).then_some(merged))
        else {
            continue;
        };
        for minute in merged
            .history
            .minutes(reported.span.from, reported.span.until)
        {
            let a = minute.added;
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{}\n",
                csv_field(&reported.room),
                rfc3339_ms(minute.start),
                minute.inside,
                minute.waiting,
                a.admitted,
                a.joined,
                a.abandoned,
                a.own.origin_requests,
                a.own.origin_errors
            ));
        }
    }
    out
}

/// The timeline drawn as an SVG: inside and waiting as lines, admitted per minute as bars, on
/// one scale.
#[derive(Debug, PartialEq)]
struct Chart {
    width: u32,
    height: u32,
    /// `x,y x,y ...` for a polyline.
    inside: String,
    waiting: String,
    bars: Vec<Bar>,
    /// The value at the top of the scale.
    top: u64,
    first: String,
    last: String,
}

#[derive(Debug, PartialEq)]
struct Bar {
    x: f64,
    y: f64,
    width: f64,
    height: f64,
}

const CHART_WIDTH: u32 = 720;
const CHART_HEIGHT: u32 = 200;

fn chart(timeline: &[Point]) -> Chart {
    let top = timeline
        .iter()
        .map(|p| p.inside.max(p.waiting).max(p.admitted))
        .max()
        .unwrap_or(0)
        .max(1);
    let (w, h) = (f64::from(CHART_WIDTH), f64::from(CHART_HEIGHT));
    let step = w / timeline.len().max(1) as f64;
    let y = |v: u64| h - h * v as f64 / top as f64;
    // Each minute's value at the middle of its slot.
    let line = |value: fn(&Point) -> u64| {
        timeline
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{:.1},{:.1}", step * (i as f64 + 0.5), y(value(p))))
            .collect::<Vec<_>>()
            .join(" ")
    };
    Chart {
        width: CHART_WIDTH,
        height: CHART_HEIGHT,
        inside: line(|p| p.inside),
        waiting: line(|p| p.waiting),
        bars: timeline
            .iter()
            .enumerate()
            .filter(|(_, p)| p.admitted > 0)
            .map(|(i, p)| Bar {
                x: step * i as f64 + step * 0.2,
                y: y(p.admitted),
                width: step * 0.6,
                height: h - y(p.admitted),
            })
            .collect(),
        top,
        first: timeline
            .first()
            .map(|p| p.minute.clone())
            .unwrap_or_default(),
        last: timeline
            .last()
            .map(|p| p.minute.clone())
            .unwrap_or_default(),
    }
}

/// Figures as the page prints them: a dash for what was not measured.
fn shown<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "–".to_owned(), |v| v.to_string())
}

struct PageSection<'a> {
    title: String,
    window: String,
    figures: &'a Figures,
    chart: Chart,
}

impl PageSection<'_> {
    fn wait_p50(&self) -> String {
        shown(self.figures.wait.p50)
    }
    fn wait_p95(&self) -> String {
        shown(self.figures.wait.p95)
    }
    fn wait_max(&self) -> String {
        shown(self.figures.wait.max)
    }
    fn tau(&self) -> String {
        shown(self.figures.order_tau)
    }
    fn origin_p95(&self) -> String {
        shown(self.figures.origin.p95_seconds)
    }
    fn error_rate(&self) -> String {
        shown(
            self.figures
                .origin
                .error_rate
                .map(|r| format!("{:.2} %", r * 100.0)),
        )
    }
}

#[derive(Template)]
#[template(path = "report.html", whitespace = "minimize")]
struct ReportPage<'a> {
    generated_at: &'a str,
    instance: &'a str,
    sections: Vec<PageSection<'a>>,
}

fn html(report: &Report, now: Millis) -> Reply {
    let mut sections = Vec::new();
    for room in &report.rooms {
        sections.push(PageSection {
            title: format!("{} ({})", room.name, room.room),
            window: window_text(&room.figures),
            figures: &room.figures,
            chart: chart(&room.figures.timeline),
        });
        for event in &room.events {
            sections.push(PageSection {
                title: format!("{}: event {}", room.name, event.event),
                window: format!("scheduled {} to {}", event.opens, event.ends),
                figures: &event.figures,
                chart: chart(&event.figures.timeline),
            });
        }
    }
    let page = ReportPage {
        generated_at: &report.generated_at,
        instance: &report.instance,
        sections,
    };
    match page.render() {
        Ok(body) => {
            // A file name without the colons of an RFC 3339 time: every system can save it.
            let day = rfc3339_ms(now).get(..16).unwrap_or("").replace(':', "-");
            Reply::html(200, body).with_header(
                "content-disposition",
                format!("attachment; filename=\"waitroom-report-{day}.html\""),
            )
        }
        Err(e) => super::error(500, format!("cannot render the report: {e}")),
    }
}

fn window_text(figures: &Figures) -> String {
    match (&figures.from, &figures.until) {
        (Some(from), Some(until)) => format!("{from} to {until}"),
        _ => "no minute recorded".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_a_format_and_an_event() {
        assert_eq!(
            Query::parse(None),
            Ok(Query {
                format: Format::Json,
                event: None
            })
        );
        assert_eq!(
            Query::parse(Some("format=csv&event=Spring%20drop")),
            Ok(Query {
                format: Format::Csv,
                event: Some("Spring drop".into())
            })
        );
        assert_eq!(
            Query::parse(Some("format=pdf")),
            Err(QueryError::Format("pdf".into()))
        );
        assert_eq!(
            Query::parse(Some("room=a")),
            Err(QueryError::Parameter("room".into()))
        );
    }

    #[test]
    fn csv_fields_are_quoted_only_when_needed() {
        assert_eq!(csv_field("drop"), "drop");
        assert_eq!(csv_field("a,\"b\""), "\"a,\"\"b\"\"\"");
    }

    fn point(inside: u64, waiting: u64, admitted: u64) -> Point {
        Point {
            minute: String::new(),
            inside,
            waiting,
            admitted,
            joined: 0,
        }
    }

    #[test]
    fn the_chart_scales_to_the_highest_value_and_draws_a_bar_per_admitting_minute() {
        let drawn = chart(&[point(0, 10, 0), point(5, 4, 5)]);
        assert_eq!(drawn.top, 10);
        // Two slots of 360: the middles at 180 and 540; 10 is the top (y 0), 0 the bottom.
        assert_eq!(drawn.waiting, "180.0,0.0 540.0,120.0");
        assert_eq!(drawn.inside, "180.0,200.0 540.0,100.0");
        assert_eq!(
            drawn.bars,
            vec![Bar {
                x: 432.0,
                y: 100.0,
                width: 216.0,
                height: 100.0
            }]
        );
        let empty = chart(&[]);
        assert_eq!((empty.top, empty.inside.as_str()), (1, ""));
    }

    #[test]
    fn an_event_span_starts_at_the_minute_of_its_opening() {
        let span = Span::of_event(90_000, 300_000);
        assert_eq!((span.from, span.until), (60_000, 300_000));
    }
}
