// k6-autopilot.js: the crowd of the autopilot's runs (load/autopilot.py starts it; issue #16).
//
//   BASE=http://127.0.0.1:8080 ARRIVALS=20 DURATION=180 RUSH=360 k6 run load/k6-autopilot.js
//
// Visitors arrive at ARRIVALS a second for DURATION seconds (k6's constant-arrival-rate: the
// crowd keeps coming however slow the room or the shop gets), after a rush of RUSH visitors
// within RUSH_SECONDS at the start (a drop opening: the room's limit is in force from the first
// seconds). Each visitor is a browser with its own cookie jar, as in k6-flashcrowd.js: it asks
// for ENTRY in JSON mode, polls at the room's refreshIntervalSeconds until the answer is the
// shop (one origin request), browses PAGES pages (one origin request each) with THINK_SECONDS
// (+-50 %) between them, and leaves (`POST /__waitroom/leave`), which frees its slot at once: the
// room's occupancy is the visitors browsing. A visitor not admitted within MAX_WAIT seconds gives
// up and leaves the line the same way, which bounds the line (and the VUs k6 needs).
//
// No thresholds: the runner judges the run from its own samples of the room and the origin. The
// counters (admitted, gave up, pages, wait) are in the summary (--summary-export).
//
// Environment (defaults in brackets):
//   BASE            proxy URL, or comma-separated URLs of several instances of one room; each
//                   visitor sticks to one [http://127.0.0.1:8080]
//   ARRIVALS [20]   visitors a second   DURATION seconds [180]   RUSH [0]   RUSH_SECONDS [5]
//   PAGES [9]       THINK_SECONDS [1]   MAX_WAIT seconds [30]   ENTRY [/]   PAGE_PREFIX [/page/]
//   MAX_VUS         most VUs for the arrivals [ARRIVALS x (MAX_WAIT + visit + 15)]
//   TIMEOUT         per request [30s]

import http from 'k6/http';
import exec from 'k6/execution';
import { check, sleep } from 'k6';
import { Counter, Trend } from 'k6/metrics';
import { bases, env, number } from './k6-env.js';

const BASES = bases();
const ARRIVALS = number('ARRIVALS', 20, { min: 0.1 });
const DURATION_S = number('DURATION', 180, { min: 1, integer: true });
const RUSH = number('RUSH', 0, { integer: true });
const RUSH_S = number('RUSH_SECONDS', 5, { min: 0.1 });
const PAGES = number('PAGES', 9, { integer: true });
const THINK_S = number('THINK_SECONDS', 1);
const MAX_WAIT_S = number('MAX_WAIT', 30, { min: 1 });
const ENTRY = env('ENTRY', '/');
const PAGE_PREFIX = env('PAGE_PREFIX', '/page/');
const TIMEOUT = env('TIMEOUT', '30s');
const VISIT_S = PAGES * THINK_S * 1.5;
const MAX_VUS = number('MAX_VUS', Math.ceil(ARRIVALS * (MAX_WAIT_S + VISIT_S + 15)), { min: 1, integer: true });
if (BASES.length === 0) throw new Error('BASE: no URL given');

const admitted = new Counter('ap_admitted');
const gaveUp = new Counter('ap_gave_up');
const pages = new Counter('ap_pages');
const waitSeconds = new Trend('ap_wait_seconds');

const scenarios = {
  crowd: {
    executor: 'constant-arrival-rate',
    exec: 'visitor',
    // A rate of whole visitors per timeUnit: per minute keeps fractions of a visitor a second.
    rate: Math.max(1, Math.round(ARRIVALS * 60)),
    timeUnit: '1m',
    duration: `${DURATION_S}s`,
    // All of them before the start: VUs made during the run cost the CPU the crowd needs.
    preAllocatedVUs: MAX_VUS,
    maxVUs: MAX_VUS,
    gracefulStop: '0s',
  },
};
if (RUSH > 0) {
  scenarios.rush = {
    executor: 'per-vu-iterations',
    exec: 'rush',
    vus: RUSH,
    iterations: 1,
    maxDuration: `${DURATION_S}s`,
    gracefulStop: '0s',
  };
}

export const options = {
  scenarios,
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(95)'],
  userAgent: 'waitroom-k6-autopilot/1',
  discardResponseBodies: false,
};

const JSON_ACCEPT = { Accept: 'application/json' };
const HTML_ACCEPT = { Accept: 'text/html,application/xhtml+xml;q=0.9,*/*;q=0.8' };

/** The waiting-room JSON of an answer, or null (the shop answered). */
function waitingRoom(res) {
  if (res.status !== 200 || typeof res.body !== 'string' || !res.body.startsWith('{')) return null;
  try {
    const body = JSON.parse(res.body);
    return body && body.cfWaitingRoom ? body : null;
  } catch (_) {
    return null;
  }
}

function visit(base) {
  const arrived = Date.now();
  let res = http.get(`${base}${ENTRY}`, { headers: JSON_ACCEPT, tags: { kind: 'arrive' }, timeout: TIMEOUT });
  let room = waitingRoom(res);
  while (room || res.status !== 200) {
    if (Date.now() - arrived >= MAX_WAIT_S * 1000) {
      gaveUp.add(1);
      http.post(`${base}/__waitroom/leave`, null, { tags: { kind: 'leave' }, timeout: TIMEOUT });
      return;
    }
    const refresh = room ? room.cfWaitingRoom.refreshIntervalSeconds : 1;
    sleep(refresh > 0 ? refresh : 1);
    res = http.get(`${base}${ENTRY}`, { headers: JSON_ACCEPT, tags: { kind: 'poll' }, timeout: TIMEOUT });
    room = waitingRoom(res);
  }
  admitted.add(1);
  waitSeconds.add((Date.now() - arrived) / 1000);
  for (let p = 1; p <= PAGES; p++) {
    sleep(THINK_S * (0.5 + Math.random()));
    const page = http.get(`${base}${PAGE_PREFIX}${p}`, {
      headers: HTML_ACCEPT,
      tags: { kind: 'page', name: `${PAGE_PREFIX}N` },
      timeout: TIMEOUT,
    });
    check(page, { 'page: from the shop': (r) => r.status === 200 && waitingRoom(r) === null });
    pages.add(1);
  }
  http.post(`${base}/__waitroom/leave`, null, { tags: { kind: 'leave' }, timeout: TIMEOUT });
}

export function visitor() {
  visit(BASES[exec.scenario.iterationInTest % BASES.length]);
}

export function rush() {
  const index = exec.scenario.iterationInTest;
  sleep((index / RUSH) * RUSH_S);
  visit(BASES[index % BASES.length]);
}
