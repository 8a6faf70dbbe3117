// k6-capacity.js: find the knee of the real site (NOT the waiting room), to size the room.
//
//   mkdir -p load/results
//   TARGET=https://shop.example.com/checkout k6 run load/k6-capacity.js
//   waitroom-proxy calibrate --summary load/results/capacity-summary.json --session 5m
//
// The load climbs in stages of active shoppers. A shopper sends a request every THINK_SECONDS on
// average, so a stage of U shoppers is an open arrival rate of U / THINK_SECONDS requests a
// second, kept up whatever the site's latency (k6's arrival-rate executors: a slow site does not
// slow the load down, as it would with closed-loop VUs). Each stage is two scenarios that follow
// each other by startTime: `rNN` ramps the rate from the previous stage's in RAMP, `sNN` holds it
// for the stage's hold time. k6 tags every request with its scenario, so only the hold (`sNN`)
// is measured for the stage: a plateau at a known number of active shoppers, the unit of
// `total_active_users`.
//
// The run stops by itself once the site breaks: every hold has thresholds with abortOnFail
// (p99 under P99_BUDGET_MS, errors under MAX_ERROR_RATE, no dropped arrivals), evaluated from
// ABORT_AFTER into that hold (delayAbortEval) so that a few early samples do not decide. A
// stopped run exits with k6's threshold code (99) and still writes the summary: the failing
// stage is the one above the knee, the stages after it did not run. A run that climbs through
// every stage exits 0: the knee is then only a lower bound.
//
// Environment:
//   TARGET          URL (or comma-separated URLs, taken in turn) of the real site
//                   (default http://127.0.0.1:3000/)
//   STAGES          active shoppers per stage, comma-separated; `USERS:HOLD` sets one stage's
//                   hold (default 10,25,50,100,150,200,300)
//   RAMP            time to ramp the arrival rate to each stage (default 10s)
//   HOLD            hold time of each stage (default 30s)
//   THINK_SECONDS   mean time between one shopper's requests (default 1)
//   TIMEOUT         request timeout; a timeout is an error (default 10s)
//   P99_BUDGET_MS   p99 latency a stage must stay under (default 500)
//   MAX_ERROR_RATE  error rate a stage must stay under (default 0.01 = 1 %)
//   ABORT_AFTER     how far into a hold its thresholds may stop the run (default 10s, at most
//                   the hold)
//   MAX_VUS         most VUs k6 may use to keep up a stage's rate (default 1000); when the site
//                   holds requests so long that they run out, arrivals are dropped, which fails
//                   the stage
//   MARGIN          safety margin for the printed estimate (default 0.35)
//   SESSION_MINUTES session length for the printed estimate (default 5)
//   SUMMARY         where to write the JSON summary (default load/results/capacity-summary.json;
//                   k6 does not create the directory)
//
// The knee is the highest stage that passes (p99 < P99_BUDGET_MS, error rate < MAX_ERROR_RATE,
// no dropped arrival) with every lower stage passing too.
//
// The JSON summary is k6's own summary object plus two keys that `waitroom-proxy calibrate` reads:
//   "waitroom_capacity": {"version": 2, "target": [...], "p99_budget_ms", "max_error_rate",
//        "think_seconds", "ramp_seconds", "abort_after_seconds", "knee_stage", "knee_users",
//        "first_failing_stage", "highest_passing_stage", "stopped_early"}
//        (stage numbers are 1-based; null when there is none; stopped_early: the thresholds
//        ended the run before its last stage)
//   "stages": [{"stage": 1, "name": "s01", "users": 10, "arrivals_per_second": 10,
//        "hold_seconds": 30, "ran": true, "requests": 290, "rps": 9.7, "p50_ms": 3.1,
//        "p95_ms": 8.0, "p99_ms": 12.4, "error_rate": 0.0, "dropped": 0, "pass": true}, ...]
//        (p*_ms and error_rate are null for a stage without requests; ran is false for the
//        stages after a stop)
// The per-stage numbers come from the scenario-tagged submetrics http_req_duration{scenario:sNN},
// http_req_failed{scenario:sNN}, http_reqs{scenario:sNN} and dropped_iterations{scenario:sNN},
// which the thresholds also keep in the summary.

import http from 'k6/http';
import exec from 'k6/execution';

const env = (name, fallback) => {
  const v = __ENV[name];
  return v === undefined || v === '' ? fallback : v;
};

function seconds(text, what) {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(String(text).trim());
  if (!m) throw new Error(`${what}: expected a duration like 30s, 2m or 500ms, got "${text}"`);
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600 }[m[2] || 's'];
  return Number(m[1]) * unit;
}

function number(name, fallback, { min = 0, max = Infinity } = {}) {
  const raw = env(name, String(fallback));
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min || v > max) {
    throw new Error(`${name}: expected a number in [${min}, ${max}], got "${raw}"`);
  }
  return v;
}

const TARGETS = env('TARGET', 'http://127.0.0.1:3000/')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const RAMP_S = seconds(env('RAMP', '10s'), 'RAMP');
const HOLD_S = seconds(env('HOLD', '30s'), 'HOLD');
const THINK_S = number('THINK_SECONDS', 1, { min: 0.001 });
const TIMEOUT = env('TIMEOUT', '10s');
const TIMEOUT_S = seconds(TIMEOUT, 'TIMEOUT');
const BUDGET_MS = number('P99_BUDGET_MS', 500, { min: 1 });
const MAX_ERROR_RATE = number('MAX_ERROR_RATE', 0.01, { max: 1 });
const ABORT_AFTER_S = seconds(env('ABORT_AFTER', '10s'), 'ABORT_AFTER');
const MAX_VUS = number('MAX_VUS', 1000, { min: 1 });
const MARGIN = number('MARGIN', 0.35, { max: 0.99 });
const SESSION_MIN = number('SESSION_MINUTES', 5, { min: 0.01 });
const SUMMARY = env('SUMMARY', 'load/results/capacity-summary.json');

const STAGES = env('STAGES', '10,25,50,100,150,200,300')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean)
  .map((spec, i) => {
    const [usersText, holdText] = spec.split(':');
    const users = Number(usersText);
    if (!Number.isInteger(users) || users < 1) {
      throw new Error(`STAGES: stage ${i + 1} ("${spec}") needs a whole number of shoppers >= 1`);
    }
    const hold = holdText === undefined ? HOLD_S : seconds(holdText, `STAGES stage ${i + 1}`);
    if (hold < 1) throw new Error(`STAGES: stage ${i + 1} holds less than 1s`);
    return { stage: i + 1, name: `s${String(i + 1).padStart(2, '0')}`, users, hold_seconds: hold };
  });
if (TARGETS.length === 0) throw new Error('TARGET: no URL given');
if (STAGES.length === 0) throw new Error('STAGES: no stage given');
for (let i = 1; i < STAGES.length; i++) {
  if (STAGES[i].users < STAGES[i - 1].users) throw new Error('STAGES: the stages must climb');
}

// Requests a minute for `users` shoppers (whole numbers: k6's rate is an integer per timeUnit).
const perMinute = (users) => Math.max(1, Math.round((users * 60) / THINK_S));
// VUs to keep up a rate whose requests may each take up to TIMEOUT.
const vusFor = (rpm) => Math.min(MAX_VUS, Math.ceil((rpm / 60) * Math.min(TIMEOUT_S, 2)) + 5);
const maxVusFor = (rpm) => Math.min(MAX_VUS, Math.ceil((rpm / 60) * TIMEOUT_S) + 5);
const fmt = (s) => `${Math.round(s * 1000)}ms`;

const scenarios = {};
const thresholds = {};
{
  let t = 0;
  let previous = 0;
  for (const s of STAGES) {
    const rpm = perMinute(s.users);
    s.arrivals_per_second = Number((rpm / 60).toFixed(3));
    if (RAMP_S > 0) {
      scenarios[`r${s.name.slice(1)}`] = {
        executor: 'ramping-arrival-rate',
        startTime: fmt(t),
        startRate: previous,
        timeUnit: '1m',
        stages: [{ duration: fmt(RAMP_S), target: rpm }],
        preAllocatedVUs: vusFor(rpm),
        maxVUs: maxVusFor(rpm),
        gracefulStop: '0s',
      };
      t += RAMP_S;
    }
    s.start_seconds = t;
    scenarios[s.name] = {
      executor: 'constant-arrival-rate',
      startTime: fmt(t),
      rate: rpm,
      timeUnit: '1m',
      duration: fmt(s.hold_seconds),
      preAllocatedVUs: vusFor(rpm),
      maxVUs: maxVusFor(rpm),
      // Requests still out at the end of the hold may finish (they count for this stage).
      gracefulStop: `${Math.ceil(TIMEOUT_S)}s`,
    };
    // Evaluated from ABORT_AFTER into this hold (delayAbortEval counts from the test's start).
    const delay = `${Math.round((t + Math.min(ABORT_AFTER_S, s.hold_seconds)) * 1000)}ms`;
    const stop = (threshold) => ({ threshold, abortOnFail: true, delayAbortEval: delay });
    thresholds[`http_req_duration{scenario:${s.name}}`] = [stop(`p(99)<${BUDGET_MS}`)];
    thresholds[`http_req_failed{scenario:${s.name}}`] = [stop(`rate<${MAX_ERROR_RATE}`)];
    thresholds[`dropped_iterations{scenario:${s.name}}`] = [stop('count<1')];
    // Always true: keeps the stage's request count in the summary data.
    thresholds[`http_reqs{scenario:${s.name}}`] = ['count>=0'];
    t += s.hold_seconds;
    previous = rpm;
  }
}

export const options = {
  scenarios,
  thresholds,
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)', 'count'],
  discardResponseBodies: true,
  userAgent: 'waitroom-k6-capacity/2',
};

export default function () {
  const url = TARGETS[exec.scenario.iterationInTest % TARGETS.length];
  http.get(url, { tags: { name: url }, timeout: TIMEOUT });
}

// ------------------------------------------------------------------ summary

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const round = (v, digits) => (v === null ? null : Number(v.toFixed(digits)));

function stageRows(data) {
  const runSeconds = data.state.testRunDurationMs / 1000;
  return STAGES.map((s) => {
    const dur = data.metrics[`http_req_duration{scenario:${s.name}}`];
    const failed = data.metrics[`http_req_failed{scenario:${s.name}}`];
    const reqs = data.metrics[`http_reqs{scenario:${s.name}}`];
    const drops = data.metrics[`dropped_iterations{scenario:${s.name}}`];
    const requests = reqs ? num(reqs.values.count) || 0 : 0;
    const dropped = drops ? num(drops.values.count) || 0 : 0;
    const has = requests > 0 && dur && failed;
    const p99 = has ? num(dur.values['p(99)']) : null;
    const errorRate = has ? num(failed.values.rate) : null;
    const ran = data.state.testRunDurationMs > s.start_seconds * 1000 && (requests > 0 || dropped > 0);
    // A threshold that stopped the run fails its stage even if the numbers settled afterwards.
    const breached = [dur, failed, drops].some(
      (m) => m && m.thresholds && Object.values(m.thresholds).some((t) => t.ok === false),
    );
    const pass =
      !breached &&
      p99 !== null &&
      errorRate !== null &&
      p99 < BUDGET_MS &&
      errorRate < MAX_ERROR_RATE &&
      dropped === 0;
    return {
      stage: s.stage,
      name: s.name,
      users: s.users,
      arrivals_per_second: s.arrivals_per_second,
      hold_seconds: s.hold_seconds,
      ran,
      requests,
      // Over the part of the hold that ran (a stopped stage ran shorter).
      rps: round(requests / Math.max(1, Math.min(s.hold_seconds, runSeconds - s.start_seconds)), 1),
      p50_ms: has ? round(num(dur.values.med), 2) : null,
      p95_ms: has ? round(num(dur.values['p(95)']), 2) : null,
      p99_ms: round(p99, 2),
      error_rate: round(errorRate, 5),
      dropped,
      pass,
    };
  });
}

function verdict(row) {
  if (!row.ran) return 'not run (stopped)';
  if (row.requests === 0) return 'FAIL (no requests)';
  if (row.pass) return 'ok';
  const why = [];
  if (!(row.p99_ms < BUDGET_MS)) why.push('p99');
  if (!(row.error_rate < MAX_ERROR_RATE)) why.push('errors');
  if (row.dropped > 0) why.push(`${row.dropped} arrivals dropped`);
  return `FAIL (${why.join(', ')})`;
}

const pad = (v, n) => String(v).padStart(n);
const ms = (v) => (v === null ? '-' : v.toFixed(1));
const pct = (v) => (v === null ? '-' : `${(v * 100).toFixed(2)} %`);

export function handleSummary(data) {
  const rows = stageRows(data);
  let knee = null;
  let firstFailing = null;
  for (const row of rows) {
    if (!row.pass) {
      firstFailing = row;
      break;
    }
    knee = row;
  }
  const passing = rows.filter((r) => r.pass);
  const highestPassing = passing.length ? passing[passing.length - 1] : null;

  const stoppedEarly = rows.some((r) => !r.ran);
  const block = {
    version: 2,
    target: TARGETS,
    p99_budget_ms: BUDGET_MS,
    max_error_rate: MAX_ERROR_RATE,
    think_seconds: THINK_S,
    ramp_seconds: RAMP_S,
    abort_after_seconds: ABORT_AFTER_S,
    knee_stage: knee ? knee.stage : null,
    knee_users: knee ? knee.users : null,
    first_failing_stage: firstFailing ? firstFailing.stage : null,
    highest_passing_stage: highestPassing ? highestPassing.stage : null,
    stopped_early: stoppedEarly,
  };

  const lines = [];
  lines.push('');
  lines.push(`waitroom capacity test: ${TARGETS.join(', ')}`);
  lines.push(
    `  a stage passes with p99 < ${BUDGET_MS} ms, errors < ${(MAX_ERROR_RATE * 100).toFixed(2)} %` +
      ` and no dropped arrival (a request every ${THINK_S} s per shopper, ramp ${RAMP_S} s,` +
      ` timeout ${TIMEOUT})`,
  );
  lines.push('');
  lines.push(' stage  users    requests    req/s    p50 ms    p95 ms    p99 ms      errors   verdict');
  for (const r of rows) {
    lines.push(
      `${pad(r.stage, 6)} ${pad(r.users, 6)} ${pad(r.requests, 11)} ${pad(r.rps === null ? '-' : r.rps, 8)}` +
        ` ${pad(ms(r.p50_ms), 9)} ${pad(ms(r.p95_ms), 9)} ${pad(ms(r.p99_ms), 9)} ${pad(pct(r.error_rate), 11)}` +
        `   ${verdict(r)}`,
    );
  }
  const all = data.metrics.http_req_duration;
  const allFailed = data.metrics.http_req_failed;
  const allReqs = data.metrics.http_reqs;
  if (all && allReqs) {
    lines.push(
      `  all requests: ${allReqs.values.count}, p99 ${ms(num(all.values['p(99)']))} ms, errors ` +
        `${pct(allFailed ? num(allFailed.values.rate) : null)}, run ${(data.state.testRunDurationMs / 1000).toFixed(0)} s`,
    );
  }
  if (stoppedEarly) {
    lines.push('  stopped by the thresholds once the site broke: the later stages did not run');
  }
  lines.push('');
  if (knee) {
    const c = Math.max(1, Math.floor(knee.users * (1 - MARGIN)));
    const rate = Math.max(1, Math.round(c / SESSION_MIN));
    lines.push(
      `knee: stage ${knee.stage}, ${knee.users} shoppers (p99 ${ms(knee.p99_ms)} ms, errors ${pct(knee.error_rate)})`,
    );
    if (firstFailing) {
      lines.push(`  next stage ${firstFailing.stage} (${firstFailing.users} shoppers) failed: ${verdict(firstFailing)}`);
    } else {
      lines.push('  no stage failed: the knee is only a lower bound, add higher STAGES to find it');
    }
    if (highestPassing && highestPassing.stage !== knee.stage) {
      lines.push(
        `  note: stage ${highestPassing.stage} (${highestPassing.users} shoppers) passed again above the failure;` +
          ' not counted (an unsteady site is sized by its first failure)',
      );
    }
    lines.push(
      `  estimate: total_active_users = ${c} (knee - ${Math.round(MARGIN * 100)} %),` +
        ` new_users_per_minute = ${rate} (for ${SESSION_MIN}-minute sessions, Little's law)`,
    );
  } else {
    lines.push('knee: none, even the first stage failed; start lower (STAGES) or fix the site first');
  }
  lines.push(`  calibrate: waitroom-proxy calibrate --summary ${SUMMARY} --session ${SESSION_MIN}m --margin ${MARGIN}`);
  lines.push(`  summary: ${SUMMARY}`);
  lines.push('');

  const out = Object.assign({ waitroom_capacity: block, stages: rows }, data);
  return {
    stdout: lines.join('\n'),
    [SUMMARY]: JSON.stringify(out, null, 2),
  };
}
