//! Sizing a room from a capacity test: `waitroom-proxy calibrate --summary FILE`.
//!
//! `load/k6-capacity.js` ramps load on the real site in stages of active shoppers and writes a
//! JSON summary with a `stages` array (see the header of that script; version 2 counts `users`
//! and stops the run once the site breaks, marking the stages after it `"ran": false`; version 1
//! counted `vus` and ran every stage). The *knee* is the highest stage that stays inside the
//! latency budget (p99) and the error budget, with every earlier stage inside too. From it:
//!
//! - `total_active_users` = knee × (1 − margin), rounded down: the knee is where the site starts
//!   to break, so the room keeps a safety margin below it (30-40 %; default 35 %);
//! - `new_users_per_minute` ≈ `total_active_users` ÷ session minutes (Little's law: people inside
//!   = arrival rate × time each stays), rounded to the nearest whole visitor, at least 1.
//!
//! And the `[autopilot]`'s bounds (docs/autopilot.md), around that starting point:
//!
//! - `max_active_users` = the first failing stage's users: the load at which the site was seen
//!   breaking, so the autopilot never admits more than what broke it (the stages are far apart,
//!   so it still finds the knee in between); with no failing stage, the highest stage tested;
//! - `min_active_users` = a quarter of the knee (an origin four times slower than in the test),
//!   at most `total_active_users`: below it, a slow origin has a cause that admitting fewer does
//!   not cure, and the room keeps serving someone;
//! - `latency_target` and `error_rate_max` = the run's budget (`P99_BUDGET_MS`,
//!   `MAX_ERROR_RATE`): the autopilot holds each window's p95 under what the stages' p99 was
//!   held to, which keeps most of the tail inside the budget too.
//!
//! Pure functions: the caller reads the file and prints the result.

use std::time::Duration;

use serde_json::Value;

use crate::core::autopilot;

/// Safety margin below the knee when none is given.
pub const DEFAULT_MARGIN: f64 = 0.35;
/// Session length (minutes) assumed when none is given: the room's default `session_duration`.
pub const DEFAULT_SESSION_MINUTES: f64 = 5.0;
/// Latency budget when the summary does not say (k6-capacity.js's default `P99_BUDGET_MS`).
pub const DEFAULT_P99_BUDGET_MS: f64 = 500.0;
/// Error budget when the summary does not say (k6-capacity.js's default `MAX_ERROR_RATE`).
pub const DEFAULT_MAX_ERROR_RATE: f64 = 0.01;

/// Rounding guard: 10 × (1 − 0.3) is 6.999… in floating point and must floor to 7.
const EPSILON: f64 = 1e-9;

/// The autopilot divides the knee by this for its lowest capacity.
const MIN_FRACTION_OF_KNEE: u64 = 4;

/// The proposed room settings and how they were derived.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// Active users of the knee stage (concurrent shoppers the site held within budget).
    pub knee_users: u64,
    pub total_active_users: u64,
    pub new_users_per_minute: u64,
    /// The autopilot's bounds; None when the run's budget is no autopilot setting (the
    /// explanation says why).
    pub autopilot: Option<AutopilotProposal>,
    /// Several lines of plain text, for a person: the knee, the margin, Little's law, the
    /// autopilot's bounds.
    pub explanation: String,
}

/// The proposed `[autopilot]` settings: bounds around the room's starting point, and the run's
/// budget as the targets. Accepted by `autopilot::Settings::validate` with the other settings
/// at their defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct AutopilotProposal {
    pub min_active_users: u64,
    pub max_active_users: u64,
    pub latency_target: Duration,
    pub error_rate_max: f64,
}

impl AutopilotProposal {
    /// The `[autopilot]` lines for the config file.
    pub fn toml(&self) -> String {
        format!(
            "[autopilot]\nenabled = true\nlatency_target = \"{}ms\"\nerror_rate_max = {}\n\
             min_active_users = {}\nmax_active_users = {}\n",
            self.latency_target.as_millis(),
            self.error_rate_max,
            self.min_active_users,
            self.max_active_users
        )
    }
}

impl Proposal {
    /// The two `[room]` lines for the config file.
    pub fn room_toml(&self) -> String {
        format!(
            "[room]\ntotal_active_users = {}\nnew_users_per_minute = {}\n",
            self.total_active_users, self.new_users_per_minute
        )
    }

    /// The same as a body for `PUT /admin/config` (live change).
    pub fn admin_patch(&self) -> Value {
        serde_json::json!({
            "total_active_users": self.total_active_users,
            "new_users_per_minute": self.new_users_per_minute,
        })
    }
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CalibrateError {
    #[error("margin must be at least 0 and below 1 (0.35 = 35 %), got {0}")]
    InvalidMargin(f64),
    #[error("session must be a positive number of minutes, got {0}")]
    InvalidSession(f64),
    #[error("not a load/k6-capacity.js summary: {0}")]
    Malformed(String),
    #[error(
        "no stage passed (p99 < {budget_ms} ms and error rate < {max_error_rate}): {first}; \
         run the capacity test from a lower load (STAGES) or fix the site first"
    )]
    NoPassingStage {
        budget_ms: f64,
        max_error_rate: f64,
        /// What happened at the first stage.
        first: String,
    },
}

/// One plateau of the capacity test.
#[derive(Debug, Clone, PartialEq)]
struct Stage {
    number: u64,
    users: u64,
    /// false: the capacity test stopped before this stage (a threshold failed below it).
    ran: bool,
    requests: u64,
    /// None: no requests were measured in that stage.
    p99_ms: Option<f64>,
    error_rate: Option<f64>,
}

impl Stage {
    fn passes(&self, budget: &Budget) -> bool {
        self.ran
            && self.requests > 0
            && matches!(self.p99_ms, Some(p) if p < budget.p99_ms)
            && matches!(self.error_rate, Some(e) if e < budget.max_error_rate)
    }

    fn describe(&self) -> String {
        let p99 = self
            .p99_ms
            .map_or_else(|| "-".to_owned(), |p| format!("{p:.1} ms"));
        let errors = self
            .error_rate
            .map_or_else(|| "-".to_owned(), |e| format!("{:.2} %", e * 100.0));
        if !self.ran {
            format!(
                "stage {} ({} users): not run (the test stopped before it)",
                self.number, self.users
            )
        } else if self.requests == 0 {
            format!(
                "stage {} ({} users): no requests measured",
                self.number, self.users
            )
        } else {
            format!(
                "stage {} ({} users): p99 {p99}, errors {errors}",
                self.number, self.users
            )
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Budget {
    p99_ms: f64,
    max_error_rate: f64,
}

fn malformed(message: impl Into<String>) -> CalibrateError {
    CalibrateError::Malformed(message.into())
}

/// A non-negative finite number, or `null` (None). Missing is an error.
fn optional_measure(
    stage: &serde_json::Map<String, Value>,
    key: &str,
    at: usize,
) -> Result<Option<f64>, CalibrateError> {
    match stage.get(key) {
        None => Err(malformed(format!("stages[{at}] has no `{key}`"))),
        Some(Value::Null) => Ok(None),
        Some(v) => match v.as_f64() {
            Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
            _ => Err(malformed(format!(
                "stages[{at}].{key} must be a number >= 0 or null, got {v}"
            ))),
        },
    }
}

fn budget(summary: &serde_json::Map<String, Value>) -> Result<Budget, CalibrateError> {
    let mut budget = Budget {
        p99_ms: DEFAULT_P99_BUDGET_MS,
        max_error_rate: DEFAULT_MAX_ERROR_RATE,
    };
    let Some(block) = summary.get("waitroom_capacity") else {
        return Ok(budget);
    };
    let block = block
        .as_object()
        .ok_or_else(|| malformed("`waitroom_capacity` must be an object"))?;
    if let Some(v) = block.get("p99_budget_ms") {
        budget.p99_ms = v
            .as_f64()
            .filter(|x| x.is_finite() && *x > 0.0)
            .ok_or_else(|| {
                malformed(format!(
                    "waitroom_capacity.p99_budget_ms must be a positive number, got {v}"
                ))
            })?;
    }
    if let Some(v) = block.get("max_error_rate") {
        budget.max_error_rate = v
            .as_f64()
            .filter(|x| x.is_finite() && *x > 0.0 && *x <= 1.0)
            .ok_or_else(|| {
                malformed(format!(
                    "waitroom_capacity.max_error_rate must be a number in (0, 1], got {v}"
                ))
            })?;
    }
    Ok(budget)
}

fn stages(summary: &serde_json::Map<String, Value>) -> Result<Vec<Stage>, CalibrateError> {
    let list = summary
        .get("stages")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            malformed("no `stages` array (write the summary with load/k6-capacity.js)")
        })?;
    if list.is_empty() {
        return Err(malformed("`stages` is empty: the test ran no stage"));
    }
    let mut out: Vec<Stage> = Vec::with_capacity(list.len());
    for (at, item) in list.iter().enumerate() {
        let stage = item
            .as_object()
            .ok_or_else(|| malformed(format!("stages[{at}] is not an object")))?;
        // Version 2 counts active users, version 1 counted VUs (the same unit: shoppers).
        let key = if stage.contains_key("users") {
            "users"
        } else {
            "vus"
        };
        let users = stage
            .get(key)
            .and_then(Value::as_u64)
            .filter(|v| *v >= 1)
            .ok_or_else(|| {
                malformed(format!(
                    "stages[{at}].{key} must be a whole number >= 1 (active users)"
                ))
            })?;
        let ran = match stage.get("ran") {
            None => true,
            Some(v) => v
                .as_bool()
                .ok_or_else(|| malformed(format!("stages[{at}].ran must be true or false")))?,
        };
        let requests = stage
            .get("requests")
            .and_then(Value::as_u64)
            .ok_or_else(|| {
                malformed(format!("stages[{at}].requests must be a whole number >= 0"))
            })?;
        let number = match stage.get("stage") {
            None => at as u64 + 1,
            Some(v) => v
                .as_u64()
                .ok_or_else(|| malformed(format!("stages[{at}].stage must be a whole number")))?,
        };
        let p99_ms = optional_measure(stage, "p99_ms", at)?;
        let error_rate = optional_measure(stage, "error_rate", at)?;
        if let Some(e) = error_rate
            && e > 1.0
        {
            return Err(malformed(format!(
                "stages[{at}].error_rate is a fraction (0..1), got {e}"
            )));
        }
        if let Some(previous) = out.last()
            && users < previous.users
        {
            return Err(malformed(format!(
                "stages must climb: stages[{at}] has {users} users after {}",
                previous.users
            )));
        }
        out.push(Stage {
            number,
            users,
            ran,
            requests,
            p99_ms,
            error_rate,
        });
    }
    Ok(out)
}

/// Proposes `total_active_users` and `new_users_per_minute` from a k6-capacity.js summary.
///
/// `session_minutes` is the room's `session_duration` in minutes (how long a visitor stays
/// inside); `margin` the fraction kept below the knee (0.35 = 35 %).
pub fn propose(
    summary: &Value,
    session_minutes: f64,
    margin: f64,
) -> Result<Proposal, CalibrateError> {
    if !(margin.is_finite() && (0.0..1.0).contains(&margin)) {
        return Err(CalibrateError::InvalidMargin(margin));
    }
    if !(session_minutes.is_finite() && session_minutes > 0.0) {
        return Err(CalibrateError::InvalidSession(session_minutes));
    }
    let summary = summary
        .as_object()
        .ok_or_else(|| malformed("the summary is not a JSON object"))?;
    let budget = budget(summary)?;
    let stages = stages(summary)?;

    // The knee: the last stage of the unbroken run of passing stages from the start.
    let first_failure = stages.iter().position(|s| !s.passes(&budget));
    let knee = match first_failure {
        Some(0) => {
            return Err(CalibrateError::NoPassingStage {
                budget_ms: budget.p99_ms,
                max_error_rate: budget.max_error_rate,
                first: stages[0].describe(),
            });
        }
        Some(i) => &stages[i - 1],
        None => &stages[stages.len() - 1],
    };

    let total_active_users = ((knee.users as f64) * (1.0 - margin) + EPSILON)
        .floor()
        .max(1.0) as u64;
    let new_users_per_minute = ((total_active_users as f64) / session_minutes)
        .round()
        .max(1.0) as u64;

    let mut lines = Vec::new();
    lines.push(format!(
        "knee: {} (budget: p99 < {} ms, errors < {:.2} %)",
        knee.describe(),
        budget.p99_ms,
        budget.max_error_rate * 100.0
    ));
    match first_failure {
        Some(i) => {
            lines.push(format!("  first failure: {}", stages[i].describe()));
            let not_run = stages[i + 1..].iter().filter(|s| !s.ran).count();
            if not_run > 0 {
                lines.push(format!(
                    "  the test stopped there: {not_run} higher stage(s) did not run"
                ));
            }
            if let Some(later) = stages[i + 1..].iter().rev().find(|s| s.passes(&budget)) {
                lines.push(format!(
                    "  ignored: stage {} passed again above the failure; an unsteady site is \
                     sized by its first failure",
                    later.number
                ));
            }
        }
        None => lines.push(
            "  no stage failed: the knee is only a lower bound (the site may take more); \
             run higher stages to find it"
                .to_owned(),
        ),
    }
    lines.push(format!(
        "total_active_users = floor({} x (1 - {margin})) = {total_active_users}: the knee minus a \
         {:.0} % safety margin",
        knee.users,
        margin * 100.0
    ));
    if margin < 0.3 {
        lines.push(
            "  note: a margin under 30 % leaves little room for slow requests, cache misses and \
             background jobs during the drop"
                .to_owned(),
        );
    }
    lines.push(format!(
        "new_users_per_minute = {total_active_users} / {session_minutes} min = {new_users_per_minute} \
         (Little's law: people inside = admissions per minute x minutes each stays)"
    ));
    let broke_at = first_failure.map(|i| &stages[i]);
    let autopilot = propose_autopilot(knee, broke_at, total_active_users, &budget);
    match &autopilot {
        Ok(a) => explain_autopilot(&mut lines, a, broke_at),
        Err(why) => lines.push(format!("no [autopilot] proposal: {why}")),
    }
    Ok(Proposal {
        knee_users: knee.users,
        total_active_users,
        new_users_per_minute,
        autopilot: autopilot.ok(),
        explanation: lines.join("\n"),
    })
}

/// The autopilot's bounds from the knee, the stage that broke the site (None: none did, and the
/// knee is the highest stage) and the run's budget; why not, when the budget is no autopilot
/// setting.
fn propose_autopilot(
    knee: &Stage,
    broke_at: Option<&Stage>,
    total_active_users: u64,
    budget: &Budget,
) -> Result<AutopilotProposal, autopilot::SettingsError> {
    let proposal = AutopilotProposal {
        min_active_users: (knee.users / MIN_FRACTION_OF_KNEE)
            .min(total_active_users)
            .max(1),
        max_active_users: broke_at.unwrap_or(knee).users,
        latency_target: Duration::from_millis(budget.p99_ms.round() as u64),
        error_rate_max: budget.max_error_rate,
    };
    autopilot::Settings {
        latency_target: proposal.latency_target,
        error_rate_max: proposal.error_rate_max,
        min_active_users: proposal.min_active_users,
        max_active_users: proposal.max_active_users,
        ..autopilot::Settings::default()
    }
    .validate()?;
    Ok(proposal)
}

fn explain_autopilot(lines: &mut Vec<String>, a: &AutopilotProposal, broke_at: Option<&Stage>) {
    lines.push(format!(
        "autopilot: steers total_active_users between min_active_users = {} (a quarter of the \
         knee, at most total_active_users: an origin up to 4x slower than in the test) and \
         max_active_users = {}",
        a.min_active_users, a.max_active_users
    ));
    match broke_at {
        Some(stage) => lines.push(format!(
            "  max_active_users: stage {} broke the site: the autopilot never goes past that load",
            stage.number
        )),
        None => lines.push(format!(
            "  max_active_users: the highest load tested ({} users); no stage broke the site, so \
             the autopilot cannot go where the test did not: test higher stages to raise it",
            a.max_active_users
        )),
    }
    lines.push(format!(
        "  latency_target = {} ms, error_rate_max = {}: the run's budget, now held by each \
         window's p95 and error rate",
        a.latency_target.as_millis(),
        a.error_rate_max
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Trimmed from a real run of load/k6-capacity.js against load/stub_origin.py
    /// (`--slots 4 --work-ms 10`, THINK_SECONDS=0.1, P99_BUDGET_MS=100): the shop tops out near
    /// 390 requests/s, so 80 VUs blow the budget.
    const REAL_SUMMARY: &str = r#"{
      "waitroom_capacity": {"version": 1, "target": ["http://127.0.0.1:13001/"],
        "p99_budget_ms": 100, "max_error_rate": 0.01, "think_seconds": 0.1, "ramp_seconds": 2,
        "knee_stage": 4, "knee_users": 40, "first_failing_stage": 5, "highest_passing_stage": 4},
      "stages": [
        {"stage": 1, "name": "s01", "vus": 5, "hold_seconds": 6, "requests": 269, "rps": 44.8,
         "p50_ms": 10.73, "p95_ms": 11.65, "p99_ms": 20.48, "error_rate": 0, "pass": true},
        {"stage": 2, "name": "s02", "vus": 10, "hold_seconds": 6, "requests": 529, "rps": 88.2,
         "p50_ms": 10.64, "p95_ms": 14.61, "p99_ms": 53.08, "error_rate": 0, "pass": true},
        {"stage": 3, "name": "s03", "vus": 20, "hold_seconds": 6, "requests": 996, "rps": 166,
         "p50_ms": 10.7, "p95_ms": 46.8, "p99_ms": 96.1, "error_rate": 0, "pass": true},
        {"stage": 4, "name": "s04", "vus": 40, "hold_seconds": 6, "requests": 2063, "rps": 343.8,
         "p50_ms": 13.6, "p95_ms": 26.7, "p99_ms": 42.0, "error_rate": 0, "pass": true},
        {"stage": 5, "name": "s05", "vus": 80, "hold_seconds": 6, "requests": 2326, "rps": 387.7,
         "p50_ms": 105.4, "p95_ms": 172.9, "p99_ms": 204.8, "error_rate": 0, "pass": false},
        {"stage": 6, "name": "s06", "vus": 160, "hold_seconds": 6, "requests": 2320, "rps": 386.7,
         "p50_ms": 312.9, "p95_ms": 336.6, "p99_ms": 628.1, "error_rate": 0, "pass": false}
      ],
      "root_group": {"name": "", "path": "", "id": "d41d8cd98f00b204e9800998ecf8427e",
                     "groups": [], "checks": []},
      "options": {"summaryTrendStats": ["avg", "min", "med", "max", "p(90)", "p(95)", "p(99)",
                  "count"], "summaryTimeUnit": "", "noColor": false},
      "state": {"isStdOutTTY": false, "isStdErrTTY": false, "testRunDurationMs": 48012.3},
      "metrics": {
        "http_req_duration{stage:s04}": {"type": "trend", "contains": "time",
          "values": {"p(99)": 42.0, "med": 13.6, "max": 61.2, "count": 2063},
          "thresholds": {"max>=0": {"ok": true}}},
        "http_req_failed{stage:s04}": {"type": "rate", "contains": "default",
          "values": {"rate": 0, "passes": 0, "fails": 2063},
          "thresholds": {"rate>=0": {"ok": true}}}
      }
    }"#;

    fn real() -> Value {
        serde_json::from_str(REAL_SUMMARY).unwrap()
    }

    /// Trimmed from a real run of the current load/k6-capacity.js (version 2: arrival-rate
    /// stages, stopped by its thresholds) against load/stub_origin.py `--slots 2 --work-ms 20`
    /// (about 100 requests/s at most), THINK_SECONDS=0.2, P99_BUDGET_MS=100, HOLD=8s,
    /// ABORT_AFTER=3s: stage 2 (100 requests/s) broke the budget 3 s into its hold, and k6
    /// stopped the run there (exit 99).
    const STOPPED_SUMMARY: &str = r#"{
      "waitroom_capacity": {"version": 2, "target": ["http://127.0.0.1:13502/"],
        "p99_budget_ms": 100, "max_error_rate": 0.01, "think_seconds": 0.2, "ramp_seconds": 2,
        "abort_after_seconds": 3, "knee_stage": 1, "knee_users": 10, "first_failing_stage": 2,
        "highest_passing_stage": 1, "stopped_early": true},
      "stages": [
        {"stage": 1, "name": "s01", "users": 10, "arrivals_per_second": 50, "hold_seconds": 8,
         "ran": true, "requests": 401, "rps": 50.1, "p50_ms": 20.92, "p95_ms": 22.82,
         "p99_ms": 26.99, "error_rate": 0, "dropped": 0, "pass": true},
        {"stage": 2, "name": "s02", "users": 20, "arrivals_per_second": 100, "hold_seconds": 8,
         "ran": true, "requests": 561, "rps": 70.1, "p50_ms": 80.9, "p95_ms": 124.4,
         "p99_ms": 130.55, "error_rate": 0, "dropped": 0, "pass": false},
        {"stage": 3, "name": "s03", "users": 40, "arrivals_per_second": 200, "hold_seconds": 8,
         "ran": false, "requests": 0, "rps": 0, "p50_ms": null, "p95_ms": null, "p99_ms": null,
         "error_rate": null, "dropped": 0, "pass": false},
        {"stage": 4, "name": "s04", "users": 80, "arrivals_per_second": 400, "hold_seconds": 8,
         "ran": false, "requests": 0, "rps": 0, "p50_ms": null, "p95_ms": null, "p99_ms": null,
         "error_rate": null, "dropped": 0, "pass": false}
      ],
      "state": {"isStdErrTTY": false, "testRunDurationMs": 17738.6, "isStdOutTTY": false},
      "metrics": {
        "http_req_duration{scenario:s02}": {"type": "trend", "contains": "time",
          "values": {"p(99)": 130.55, "med": 80.9, "count": 561},
          "thresholds": {"p(99)<100": {"ok": false}}}
      }
    }"#;

    #[test]
    fn a_run_stopped_by_its_thresholds_is_sized_by_the_stage_below_the_break() {
        let summary: Value = serde_json::from_str(STOPPED_SUMMARY).unwrap();
        let p = propose(&summary, 5.0, 0.35).unwrap();
        assert_eq!(p.knee_users, 10);
        assert_eq!(p.total_active_users, 6); // floor(10 x 0.65)
        assert_eq!(p.new_users_per_minute, 1); // 6 / 5 = 1.2
        assert!(
            p.explanation
                .contains("first failure: stage 2 (20 users): p99 130.6 ms"),
            "{}",
            p.explanation
        );
        assert!(
            p.explanation.contains("2 higher stage(s) did not run"),
            "{}",
            p.explanation
        );
        assert!(!p.explanation.contains("lower bound"));
    }

    #[test]
    fn a_stage_that_did_not_run_never_passes() {
        // Numbers without having run (a hand-edited file) do not make a stage pass.
        let s = json!({"stages": [
            stage(10, 10.0, 0.0),
            {"users": 20, "ran": false, "requests": 100, "p99_ms": 5.0, "error_rate": 0.0}
        ]});
        let p = propose(&s, 5.0, 0.35).unwrap();
        assert_eq!(p.knee_users, 10);
        assert!(p.explanation.contains("not run"), "{}", p.explanation);
    }

    fn stage(users: u64, p99: f64, errors: f64) -> Value {
        json!({"users": users, "requests": 1000, "p99_ms": p99, "error_rate": errors})
    }

    #[test]
    fn real_summary_knee_margin_and_littles_law() {
        let p = propose(&real(), 5.0, 0.35).unwrap();
        assert_eq!(p.knee_users, 40);
        assert_eq!(p.total_active_users, 26); // floor(40 x 0.65)
        assert_eq!(p.new_users_per_minute, 5); // 26 / 5 = 5.2
        assert!(
            p.explanation.contains("stage 4 (40 users)"),
            "{}",
            p.explanation
        );
        assert!(
            p.explanation
                .contains("first failure: stage 5 (80 users): p99 204.8 ms"),
            "{}",
            p.explanation
        );
        assert!(p.explanation.contains("Little's law"));
        assert_eq!(
            p.room_toml(),
            "[room]\ntotal_active_users = 26\nnew_users_per_minute = 5\n"
        );
        assert_eq!(
            p.admin_patch(),
            json!({"total_active_users": 26, "new_users_per_minute": 5})
        );
    }

    #[test]
    fn budget_comes_from_the_summary_and_defaults_to_500_ms_and_1_percent() {
        // With the default 500 ms budget, 80 VUs (204.8 ms) pass and 160 VUs (628.1 ms) fail.
        let mut s = real();
        s.as_object_mut().unwrap().remove("waitroom_capacity");
        let p = propose(&s, 5.0, 0.35).unwrap();
        assert_eq!(p.knee_users, 80);
        assert_eq!(p.total_active_users, 52);
        assert_eq!(p.new_users_per_minute, 10); // 10.4

        let errors = json!({"stages": [stage(10, 50.0, 0.0), stage(20, 50.0, 0.01)]});
        assert_eq!(propose(&errors, 5.0, 0.35).unwrap().knee_users, 10);
    }

    #[test]
    fn session_length_and_margin_drive_the_numbers() {
        let s = json!({"stages": [stage(100, 80.0, 0.0), stage(200, 900.0, 0.0)]});
        let p = propose(&s, 10.0, 0.3).unwrap();
        assert_eq!(p.total_active_users, 70); // not 69: 100 x 0.7 is 69.99999… in f64
        assert_eq!(p.new_users_per_minute, 7);
        let p = propose(&s, 0.5, 0.4).unwrap(); // 30 s sessions
        assert_eq!(p.total_active_users, 60);
        assert_eq!(p.new_users_per_minute, 120);
        let p = propose(&s, 5.0, 0.0).unwrap();
        assert_eq!(p.total_active_users, 100);
        assert_eq!(p.new_users_per_minute, 20);
        assert!(
            propose(&s, 5.0, 0.2)
                .unwrap()
                .explanation
                .contains("under 30 %")
        );
    }

    #[test]
    fn never_below_one() {
        let s = json!({"stages": [stage(1, 10.0, 0.0)]});
        let p = propose(&s, 60.0, 0.35).unwrap();
        assert_eq!((p.total_active_users, p.new_users_per_minute), (1, 1));
    }

    #[test]
    fn every_stage_passing_gives_a_lower_bound() {
        let s = json!({"stages": [stage(10, 10.0, 0.0), stage(50, 20.0, 0.0)]});
        let p = propose(&s, 5.0, 0.35).unwrap();
        assert_eq!(p.knee_users, 50);
        assert!(p.explanation.contains("lower bound"), "{}", p.explanation);
    }

    #[test]
    fn a_stage_passing_above_a_failure_does_not_count() {
        let s = json!({"stages": [
            stage(10, 10.0, 0.0), stage(20, 600.0, 0.0), stage(40, 30.0, 0.0)
        ]});
        let p = propose(&s, 5.0, 0.35).unwrap();
        assert_eq!(p.knee_users, 10);
        assert!(
            p.explanation.contains("ignored: stage 3"),
            "{}",
            p.explanation
        );
    }

    #[test]
    fn a_stage_without_requests_fails() {
        let s = json!({"stages": [
            stage(10, 10.0, 0.0),
            {"users": 20, "requests": 0, "p99_ms": null, "error_rate": null},
            stage(40, 30.0, 0.0)
        ]});
        assert_eq!(propose(&s, 5.0, 0.35).unwrap().knee_users, 10);
    }

    #[test]
    fn no_passing_stage_is_an_error() {
        let s = json!({
            "waitroom_capacity": {"p99_budget_ms": 200, "max_error_rate": 0.01},
            "stages": [stage(10, 250.0, 0.0), stage(20, 100.0, 0.0)]
        });
        let e = propose(&s, 5.0, 0.35).unwrap_err();
        assert_eq!(
            e,
            CalibrateError::NoPassingStage {
                budget_ms: 200.0,
                max_error_rate: 0.01,
                first: "stage 1 (10 users): p99 250.0 ms, errors 0.00 %".to_owned(),
            }
        );
        assert!(e.to_string().contains("p99 < 200 ms"), "{e}");

        let errors = json!({"stages": [stage(10, 5.0, 0.5)]});
        assert!(matches!(
            propose(&errors, 5.0, 0.35),
            Err(CalibrateError::NoPassingStage { .. })
        ));
        let empty_run = json!({"stages": [{"users": 10, "requests": 0, "p99_ms": null,
                                            "error_rate": null}]});
        let e = propose(&empty_run, 5.0, 0.35).unwrap_err();
        assert!(e.to_string().contains("no requests measured"), "{e}");
    }

    #[test]
    fn malformed_summaries_are_errors() {
        let cases = [
            (json!([1, 2]), "not a JSON object"),
            (json!({"metrics": {}}), "no `stages` array"),
            (json!({"stages": {"vus": 1}}), "no `stages` array"),
            (json!({"stages": []}), "empty"),
            (json!({"stages": [7]}), "stages[0] is not an object"),
            (
                json!({"stages": [{"requests": 1, "p99_ms": 1, "error_rate": 0}]}),
                "stages[0].vus must be",
            ),
            (
                json!({"stages": [{"vus": 0, "requests": 1, "p99_ms": 1, "error_rate": 0}]}),
                "vus",
            ),
            (
                json!({"stages": [{"vus": "10", "requests": 1, "p99_ms": 1, "error_rate": 0}]}),
                "vus",
            ),
            (
                json!({"stages": [{"vus": 10, "p99_ms": 1, "error_rate": 0}]}),
                "requests",
            ),
            (
                json!({"stages": [{"users": 0, "requests": 1, "p99_ms": 1, "error_rate": 0}]}),
                "stages[0].users must be",
            ),
            (
                json!({"stages": [{"users": 5, "ran": "no", "requests": 0, "p99_ms": null,
                                   "error_rate": null}]}),
                "ran must be",
            ),
            (
                json!({"stages": [{"vus": 10, "requests": 1, "error_rate": 0}]}),
                "has no `p99_ms`",
            ),
            (
                json!({"stages": [{"vus": 10, "requests": 1, "p99_ms": -1, "error_rate": 0}]}),
                "p99_ms",
            ),
            (
                json!({"stages": [{"vus": 10, "requests": 1, "p99_ms": 1, "error_rate": "0"}]}),
                "error_rate",
            ),
            (
                json!({"stages": [{"vus": 10, "requests": 1, "p99_ms": 1, "error_rate": 2}]}),
                "fraction",
            ),
            (
                json!({"stages": [stage(20, 1.0, 0.0), stage(10, 1.0, 0.0)]}),
                "must climb",
            ),
            (
                json!({"waitroom_capacity": 3, "stages": [stage(10, 1.0, 0.0)]}),
                "waitroom_capacity",
            ),
            (
                json!({"waitroom_capacity": {"p99_budget_ms": 0}, "stages": [stage(10, 1.0, 0.0)]}),
                "p99_budget_ms",
            ),
            (
                json!({"waitroom_capacity": {"max_error_rate": "1%"}, "stages": [stage(10, 1.0, 0.0)]}),
                "max_error_rate",
            ),
        ];
        for (summary, needle) in cases {
            match propose(&summary, 5.0, 0.35) {
                Err(e @ CalibrateError::Malformed(_)) => {
                    assert!(e.to_string().contains(needle), "{summary}: {e}")
                }
                other => panic!("{summary}: expected Malformed({needle}), got {other:?}"),
            }
        }
    }

    #[test]
    fn the_autopilot_goes_from_a_quarter_of_the_knee_to_where_the_site_broke() {
        let p = propose(&real(), 5.0, 0.35).unwrap();
        let a = p.autopilot.unwrap();
        assert_eq!(
            a,
            AutopilotProposal {
                min_active_users: 10, // 40 / 4
                max_active_users: 80, // stage 5 broke the site
                latency_target: Duration::from_millis(100),
                error_rate_max: 0.01,
            }
        );
        assert_eq!(
            a.toml(),
            "[autopilot]\nenabled = true\nlatency_target = \"100ms\"\nerror_rate_max = 0.01\n\
             min_active_users = 10\nmax_active_users = 80\n"
        );
        assert!(
            p.explanation.contains("stage 5 broke the site"),
            "{}",
            p.explanation
        );

        // The run stopped by its thresholds: the stage that stopped it is the ceiling.
        let stopped: Value = serde_json::from_str(STOPPED_SUMMARY).unwrap();
        let a = propose(&stopped, 5.0, 0.35).unwrap().autopilot.unwrap();
        assert_eq!((a.min_active_users, a.max_active_users), (2, 20));

        // Without a budget in the summary: k6-capacity.js's defaults.
        let s = json!({"stages": [stage(100, 80.0, 0.0), stage(200, 900.0, 0.0)]});
        let a = propose(&s, 5.0, 0.35).unwrap().autopilot.unwrap();
        assert_eq!(a.latency_target, Duration::from_millis(500));
        assert_eq!(a.error_rate_max, 0.01);
        assert_eq!((a.min_active_users, a.max_active_users), (25, 200));
    }

    #[test]
    fn the_autopilot_bounds_hold_the_starting_point() {
        // A deep margin puts the room's start under a quarter of the knee: the floor follows it.
        let s = json!({"stages": [stage(100, 80.0, 0.0), stage(200, 900.0, 0.0)]});
        let p = propose(&s, 5.0, 0.9).unwrap();
        let a = p.autopilot.unwrap();
        assert_eq!(p.total_active_users, 10);
        assert_eq!(a.min_active_users, 10);
        // A tiny knee still leaves one visitor in.
        let s = json!({"stages": [stage(3, 10.0, 0.0), stage(6, 900.0, 0.0)]});
        let a = propose(&s, 5.0, 0.35).unwrap().autopilot.unwrap();
        assert_eq!((a.min_active_users, a.max_active_users), (1, 6));
        // No stage broke the site: the autopilot stays within what was tested.
        let s = json!({"stages": [stage(10, 10.0, 0.0), stage(50, 20.0, 0.0)]});
        let p = propose(&s, 5.0, 0.35).unwrap();
        assert_eq!(p.autopilot.unwrap().max_active_users, 50);
        assert!(
            p.explanation.contains("test higher stages to raise it"),
            "{}",
            p.explanation
        );
    }

    #[test]
    fn a_budget_the_autopilot_cannot_hold_gets_no_autopilot_proposal() {
        for (budget, needle) in [
            (json!({"p99_budget_ms": 90_000}), "autopilot.latency_target"),
            (json!({"p99_budget_ms": 0.2}), "autopilot.latency_target"),
            (json!({"max_error_rate": 1}), "autopilot.error_rate_max"),
        ] {
            let s = json!({"waitroom_capacity": budget,
                           "stages": [stage(10, 0.1, 0.0), stage(20, 1e9, 0.0)]});
            let p = propose(&s, 5.0, 0.35).unwrap();
            assert_eq!(p.autopilot, None, "{budget}");
            assert!(
                p.explanation.contains("no [autopilot] proposal") && p.explanation.contains(needle),
                "{}",
                p.explanation
            );
            assert_eq!(p.total_active_users, 6, "the room is still sized");
        }
    }

    #[test]
    fn bad_arguments_are_errors() {
        let s = real();
        for margin in [1.0, 1.5, -0.1, f64::NAN] {
            assert!(matches!(
                propose(&s, 5.0, margin),
                Err(CalibrateError::InvalidMargin(_))
            ));
        }
        for session in [0.0, -5.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                propose(&s, session, 0.35),
                Err(CalibrateError::InvalidSession(_))
            ));
        }
    }
}
