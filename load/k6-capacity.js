// k6-capacity.js: find the knee of the real site (NOT the waiting room), to size the room.
//
//   mkdir -p load/results
//   TARGET=https://shop.example.com/checkout k6 run load/k6-capacity.js
//   waitroom-proxy calibrate --summary load/results/capacity-summary.json --session 5m
//
// The load climbs in stages; each stage ramps to its VU count and then holds it. Only requests
// sent during a hold are measured for that stage (tag `stage=s01`, `s02`, ...; ramps are tagged
// `ramp`), so every stage is a plateau at a known number of concurrent users. A VU behaves like
// one shopper: a request, then THINK_SECONDS of think time, so VUs ~ active users, the unit of
// `total_active_users`.
//
// Environment:
//   TARGET          URL (or comma-separated URLs, taken in turn) of the real site
//                   (default http://127.0.0.1:3000/)
//   STAGES          VU counts, comma-separated; `VUS:HOLD` sets one stage's hold
//                   (default 10,25,50,100,150,200,300)
//   RAMP            ramp time to each stage (default 10s)
//   HOLD            hold time of each stage (default 30s)
//   THINK_SECONDS   mean think time between a VU's requests, jittered +-50 % (default 1)
//   TIMEOUT         request timeout; a timeout is an error (default 10s)
//   P99_BUDGET_MS   p99 latency a stage must stay under (default 500)
//   MAX_ERROR_RATE  error rate a stage must stay under (default 0.01 = 1 %)
//   MARGIN          safety margin for the printed estimate (default 0.35)
//   SESSION_MINUTES session length for the printed estimate (default 5)
//   SUMMARY         where to write the JSON summary (default load/results/capacity-summary.json;
//                   k6 does not create the directory)
//
// The knee is the highest stage that passes (p99 < P99_BUDGET_MS and error rate <
// MAX_ERROR_RATE) with every lower stage passing too: a stage above a failed one does not count.
//
// The JSON summary is k6's own summary object plus two keys that `waitroom-proxy calibrate` reads:
//   "waitroom_capacity": {"version": 1, "target": [...], "p99_budget_ms", "max_error_rate",
//        "think_seconds", "knee_stage", "knee_vus", "first_failing_stage", "highest_passing_stage"}
//        (stage numbers are 1-based; null when there is none)
//   "stages": [{"stage": 1, "name": "s01", "vus": 10, "hold_seconds": 30, "requests": 290,
//        "rps": 9.7, "p50_ms": 3.1, "p95_ms": 8.0, "p99_ms": 12.4, "error_rate": 0.0,
//        "pass": true}, ...]   (p*_ms and error_rate are null for a stage without requests)
// The per-stage numbers come from the tagged submetrics http_req_duration{stage:sNN},
// http_req_failed{stage:sNN} and http_reqs{stage:sNN}; the script declares always-true thresholds
// on them only so that k6 keeps them in the summary (they never fail a run).

import http from 'k6/http';
import exec from 'k6/execution';
import { sleep } from 'k6';

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
const THINK_S = number('THINK_SECONDS', 1);
const TIMEOUT = env('TIMEOUT', '10s');
const BUDGET_MS = number('P99_BUDGET_MS', 500, { min: 1 });
const MAX_ERROR_RATE = number('MAX_ERROR_RATE', 0.01, { max: 1 });
const MARGIN = number('MARGIN', 0.35, { max: 0.99 });
const SESSION_MIN = number('SESSION_MINUTES', 5, { min: 0.01 });
const SUMMARY = env('SUMMARY', 'load/results/capacity-summary.json');

const STAGES = env('STAGES', '10,25,50,100,150,200,300')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean)
  .map((spec, i) => {
    const [vusText, holdText] = spec.split(':');
    const vus = Number(vusText);
    if (!Number.isInteger(vus) || vus < 1) {
      throw new Error(`STAGES: stage ${i + 1} ("${spec}") needs a whole number of VUs >= 1`);
    }
    const hold = holdText === undefined ? HOLD_S : seconds(holdText, `STAGES stage ${i + 1}`);
    return { stage: i + 1, name: `s${String(i + 1).padStart(2, '0')}`, vus, hold_seconds: hold };
  });
if (TARGETS.length === 0) throw new Error('TARGET: no URL given');
if (STAGES.length === 0) throw new Error('STAGES: no stage given');

// Timeline of the single ramping-vus scenario: [ramp, hold] per stage, in milliseconds from the
// scenario start. A request is tagged with the segment it starts in.
const SEGMENTS = [];
{
  let t = 0;
  for (const s of STAGES) {
    SEGMENTS.push({ from: t, to: t + RAMP_S * 1000, tag: 'ramp' });
    t += RAMP_S * 1000;
    SEGMENTS.push({ from: t, to: t + s.hold_seconds * 1000, tag: s.name });
    t += s.hold_seconds * 1000;
  }
}

const thresholds = {};
for (const s of STAGES) {
  // Always true: only there so that k6 keeps these submetrics in the summary data.
  thresholds[`http_req_duration{stage:${s.name}}`] = ['max>=0'];
  thresholds[`http_req_failed{stage:${s.name}}`] = ['rate>=0'];
  thresholds[`http_reqs{stage:${s.name}}`] = ['count>=0'];
}

const fmt = (s) => `${Math.round(s * 1000)}ms`;

export const options = {
  scenarios: {
    capacity: {
      executor: 'ramping-vus',
      startVUs: 0,
      stages: STAGES.flatMap((s) => [
        { duration: fmt(RAMP_S), target: s.vus },
        { duration: fmt(s.hold_seconds), target: s.vus },
      ]),
      gracefulRampDown: '0s',
      gracefulStop: '5s',
    },
  },
  thresholds,
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(90)', 'p(95)', 'p(99)', 'count'],
  discardResponseBodies: true,
  // Quieter output: one request URL is enough, and the stage tag carries the phase.
  userAgent: 'waitroom-k6-capacity/1',
};

function currentStage() {
  const elapsed = Date.now() - exec.scenario.startTime;
  for (const seg of SEGMENTS) {
    if (elapsed >= seg.from && elapsed < seg.to) return seg.tag;
  }
  return 'tail';
}

export default function () {
  const url = TARGETS[exec.scenario.iterationInTest % TARGETS.length];
  http.get(url, { tags: { stage: currentStage(), name: url }, timeout: TIMEOUT });
  if (THINK_S > 0) sleep(THINK_S * (0.5 + Math.random()));
}

// ------------------------------------------------------------------ summary

const num = (v) => (typeof v === 'number' && Number.isFinite(v) ? v : null);
const round = (v, digits) => (v === null ? null : Number(v.toFixed(digits)));

function stageRows(data) {
  return STAGES.map((s) => {
    const dur = data.metrics[`http_req_duration{stage:${s.name}}`];
    const failed = data.metrics[`http_req_failed{stage:${s.name}}`];
    const reqs = data.metrics[`http_reqs{stage:${s.name}}`];
    const requests = reqs ? num(reqs.values.count) || 0 : 0;
    const has = requests > 0 && dur && failed;
    const p99 = has ? num(dur.values['p(99)']) : null;
    const errorRate = has ? num(failed.values.rate) : null;
    const pass = p99 !== null && errorRate !== null && p99 < BUDGET_MS && errorRate < MAX_ERROR_RATE;
    return {
      stage: s.stage,
      name: s.name,
      vus: s.vus,
      hold_seconds: s.hold_seconds,
      requests,
      rps: round(requests / s.hold_seconds, 1),
      p50_ms: has ? round(num(dur.values.med), 2) : null,
      p95_ms: has ? round(num(dur.values['p(95)']), 2) : null,
      p99_ms: round(p99, 2),
      error_rate: round(errorRate, 5),
      pass,
    };
  });
}

function verdict(row) {
  if (row.requests === 0) return 'FAIL (no requests)';
  if (row.pass) return 'ok';
  const why = [];
  if (!(row.p99_ms < BUDGET_MS)) why.push('p99');
  if (!(row.error_rate < MAX_ERROR_RATE)) why.push('errors');
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

  const block = {
    version: 1,
    target: TARGETS,
    p99_budget_ms: BUDGET_MS,
    max_error_rate: MAX_ERROR_RATE,
    think_seconds: THINK_S,
    ramp_seconds: RAMP_S,
    knee_stage: knee ? knee.stage : null,
    knee_vus: knee ? knee.vus : null,
    first_failing_stage: firstFailing ? firstFailing.stage : null,
    highest_passing_stage: highestPassing ? highestPassing.stage : null,
  };

  const lines = [];
  lines.push('');
  lines.push(`waitroom capacity test: ${TARGETS.join(', ')}`);
  lines.push(
    `  a stage passes with p99 < ${BUDGET_MS} ms and errors < ${(MAX_ERROR_RATE * 100).toFixed(2)} %` +
      ` (think time ${THINK_S} s, ramp ${RAMP_S} s, timeout ${TIMEOUT})`,
  );
  lines.push('');
  lines.push(' stage    VUs    requests    req/s    p50 ms    p95 ms    p99 ms      errors   verdict');
  for (const r of rows) {
    lines.push(
      `${pad(r.stage, 6)} ${pad(r.vus, 6)} ${pad(r.requests, 11)} ${pad(r.rps === null ? '-' : r.rps, 8)}` +
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
  lines.push('');
  if (knee) {
    const c = Math.max(1, Math.floor(knee.vus * (1 - MARGIN)));
    const rate = Math.max(1, Math.round(c / SESSION_MIN));
    lines.push(`knee: stage ${knee.stage}, ${knee.vus} VUs (p99 ${ms(knee.p99_ms)} ms, errors ${pct(knee.error_rate)})`);
    if (firstFailing) {
      lines.push(`  next stage ${firstFailing.stage} (${firstFailing.vus} VUs) failed: ${verdict(firstFailing)}`);
    } else {
      lines.push('  no stage failed: the knee is only a lower bound, add higher STAGES to find it');
    }
    if (highestPassing && highestPassing.stage !== knee.stage) {
      lines.push(
        `  note: stage ${highestPassing.stage} (${highestPassing.vus} VUs) passed again above the failure;` +
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
