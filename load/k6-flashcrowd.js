// k6-flashcrowd.js: a crowd hits the waiting room at once; the room must hold.
//
//   BASE=http://127.0.0.1:8080 ADMIN=http://127.0.0.1:9091 ADMIN_TOKEN=... \
//   CAPACITY=200 RATE_PER_MINUTE=40 k6 run --console-output=series.log load/k6-flashcrowd.js
//
// (load/flashcrowd.sh runs all of it on loopback: a stub origin, the proxy, this script.)
// The whole crowd comes from this machine's address: the room under test needs
// `[rate_limit] tickets_per_ip_per_minute = 0` and `max_live_tickets_per_ip = 0`, or its
// per-address limit answers most arrivals with 429 (flashcrowd.sh turns it off).
//
// VISITORS visitors arrive evenly within ARRIVAL seconds. Each one is a browser with its own
// cookie jar: it asks for ENTRY in JSON mode (`Accept: application/json`), polls every
// refreshIntervalSeconds until the answer is the shop instead of the waiting-room JSON, browses
// PAGES pages, then leaves in one of three ways (LEAVE_MIX): POST /__waitroom/leave, a visit to
// CHECKOUT_PATH (an origin answering `Cf-Waiting-Room-Command: revoke`), or going idle until its
// session ends. A second scenario reads ADMIN/admin/state every SAMPLE_SECONDS.
//
// Thresholds (any failure makes k6 exit 99):
//   http_req_failed          rate==0     no HTTP error, no timeout, anywhere
//   checks                   rate==1     every response as expected (200 for pages and polls, ...)
//   admitted_visitors        count>=VISITORS   everybody got in in the end
//   wr_occupancy             max<=CAPACITY     sampled occupancy never above total_active_users
//   wr_admitted_last_minute  max<=RATE_PER_MINUTE+BURST   the token bucket's bound over a minute
//   wr_rate_overshoot        max<=0      the same bound over every window between two samples:
//                                        admitted_total grows by at most BURST + RATE x window
//                                        (exercises the limiter in runs shorter than a minute)
//   wr_samples               count>=1    the sampler saw the room at least once
//   wr_position_went_up      count==0    FIFO: a waiting visitor's position never grows (FIFO=0 off)
//   wr_occupancy_end         value==0    DRAIN=1 only: the room is empty at the end (expiry heals)
//
// Environment (defaults in brackets):
//   BASE             proxy URL, or comma-separated URLs of several instances of one room
//                    [http://127.0.0.1:8080]; visitors are spread over them
//   SPREAD           visitor: each visitor sticks to one instance; request: every request picks
//                    one at random (needs one cookie host, e.g. several ports of 127.0.0.1) [visitor]
//   VISITORS [2000]  ARRIVAL seconds [10]  PAGES [3]  THINK_SECONDS between pages [1]
//   ENTRY            path the crowd asks for [/]; PAGE_PREFIX [/page/] + 1..PAGES
//   CHECKOUT_PATH    [/checkout]   LEAVE_MIX [leave=40,revoke=30,idle=30] (weights)
//   POLL_SECONDS     poll period instead of the room's refreshIntervalSeconds
//   MAX_WAIT         seconds a visitor waits to be admitted before giving up [600]
//   COOKIE_NAME      [waitroom]   ORIGIN_COOKIE  a cookie the origin sets, checked to survive
//                    next to the pass (load/stub_origin.py sets shop_session) [unset: no check]
//   ADMIN [http://127.0.0.1:9091]  ADMIN_TOKEN (required)  SAMPLE_SECONDS [1]
//   CAPACITY, RATE_PER_MINUTE (required: the room's total_active_users, new_users_per_minute;
//                    setup() checks them against /admin/state)  BURST [RATE_PER_MINUTE]
//   TAIL_SECONDS     sampling after the last visitor is done, until the room is empty [5]
//   DRAIN            1: require the room to be empty at the end (TAIL_SECONDS > session) [0]
//   FIFO             0: skip the position check (random queueing) [1]
//   TIMEOUT          per request [10s]
//   ROOMS            several rooms of one proxy, "id:prefix:capacity:rate[:burst],..." (e.g.
//                    "sneakers:/drop/sneakers:50:600,tickets:/tickets:30:300"): visitors take the
//                    rooms in turn, each asking for <prefix>/ and browsing <prefix>/page/N with
//                    the room's cookie (COOKIE_NAME-id); the sampler reads
//                    /admin/rooms/<id>/state, and every sampler threshold holds per room
//                    (wr_occupancy{room:id} max<=its capacity, ...). CAPACITY and RATE_PER_MINUTE
//                    are then not used. [unset: one room, /admin/state]
//
// Time series: k6 cannot write files from a test, so the sampler logs one line per sample (and
// per room: with ROOMS, the room's id is appended),
//   SERIES,<timestamp ISO 8601>,<occupancy>,<queue_length>,<admitted_last_minute>,<elapsed s>,<admitted_total>
// Run k6 with --console-output=FILE and keep those lines: load/flashcrowd.sh writes them as CSV to
// SERIES (header: timestamp,occupancy,queue_length,admitted_last_minute,elapsed_s,admitted_total).

import http from 'k6/http';
import exec from 'k6/execution';
import { check, sleep } from 'k6';
import { Counter, Gauge, Trend } from 'k6/metrics';
import { bases, env, number } from './k6-env.js';

const LIMITS_HINT =
  "CAPACITY = the room's total_active_users, RATE_PER_MINUTE = its new_users_per_minute; " +
  'GET /admin/state shows both';
const BASES = bases();
const SPREAD = env('SPREAD', 'visitor');
const VISITORS = number('VISITORS', 2000, { min: 1, integer: true });
const ARRIVAL_S = number('ARRIVAL', 10);
const PAGES = number('PAGES', 3, { integer: true });
const THINK_S = number('THINK_SECONDS', 1);
const CHECKOUT_PATH = env('CHECKOUT_PATH', '/checkout');
const POLL_S = __ENV.POLL_SECONDS ? number('POLL_SECONDS', 1) : null;
const MAX_WAIT_S = number('MAX_WAIT', 600, { min: 1 });
const ORIGIN_COOKIE = env('ORIGIN_COOKIE', '');
const ADMIN = env('ADMIN', 'http://127.0.0.1:9091').replace(/\/+$/, '');
const ADMIN_TOKEN = env('ADMIN_TOKEN', '');
const SAMPLE_S = number('SAMPLE_SECONDS', 1, { min: 0.1 });
// The rooms under test: one (the proxy's only room, /admin/state) unless ROOMS names several.
const ROOMS = (() => {
  const spec = env('ROOMS', '');
  if (!spec) {
    const capacity = number('CAPACITY', undefined, { min: 1, integer: true, required: LIMITS_HINT });
    const rate = number('RATE_PER_MINUTE', undefined, { min: 1, integer: true, required: LIMITS_HINT });
    return [
      {
        id: null,
        capacity,
        rate,
        burst: number('BURST', rate, { min: 1, integer: true }),
        entry: env('ENTRY', '/'),
        pagePrefix: env('PAGE_PREFIX', '/page/'),
        cookie: env('COOKIE_NAME', 'waitroom'),
        state: '/admin/state',
        leave: '/__waitroom/leave',
      },
    ];
  }
  return spec.split(',').map((part) => {
    const [id, prefix, capacity, rate, burst] = part.split(':').map((x) => x.trim());
    const whole = (name, raw) => {
      const v = Number(raw);
      if (!Number.isInteger(v) || v < 1) throw new Error(`ROOMS "${part}": ${name} must be a whole number >= 1`);
      return v;
    };
    if (!/^[A-Za-z0-9_-]+$/.test(id || '') || !(prefix || '').startsWith('/')) {
      throw new Error(`ROOMS: expected id:prefix:capacity:rate[:burst], got "${part}"`);
    }
    const base = prefix.replace(/\/+$/, '');
    return {
      id,
      capacity: whole('capacity', capacity),
      rate: whole('rate', rate),
      burst: whole('burst', burst === undefined ? rate : burst),
      entry: `${base}/`,
      pagePrefix: `${base}/page/`,
      cookie: `${env('COOKIE_NAME', 'waitroom')}-${id}`,
      state: `/admin/rooms/${id}/state`,
      leave: `/__waitroom/leave?room=${id}`,
    };
  });
})();
const TAIL_S = number('TAIL_SECONDS', 5);
const DRAIN = env('DRAIN', '0') === '1';
const FIFO = env('FIFO', '1') !== '0';
const TIMEOUT = env('TIMEOUT', '10s');

if (BASES.length === 0) throw new Error('BASE: no URL given');
if (!['visitor', 'request'].includes(SPREAD)) throw new Error('SPREAD must be visitor or request');
if (!ADMIN_TOKEN) throw new Error('ADMIN_TOKEN is required (the [admin] token / WR_ADMIN_TOKEN)');

// LEAVE_MIX "leave=40,revoke=30,idle=30" -> cumulative weights.
const LEAVE_MIX = (() => {
  const parts = env('LEAVE_MIX', 'leave=40,revoke=30,idle=30').split(',');
  const out = [];
  let total = 0;
  for (const part of parts) {
    const [how, w] = part.split('=').map((s) => s.trim());
    const weight = Number(w);
    if (!['leave', 'revoke', 'idle'].includes(how) || !(weight >= 0)) {
      throw new Error(`LEAVE_MIX: expected leave=N,revoke=N,idle=N, got "${part}"`);
    }
    total += weight;
    out.push({ how, upTo: total });
  }
  if (total <= 0) throw new Error('LEAVE_MIX: the weights add up to 0');
  return out.map((m) => ({ how: m.how, upTo: m.upTo / total }));
})();

// Visitor metrics.
const admittedVisitors = new Counter('admitted_visitors');
const notAdmitted = new Counter('wr_not_admitted');
const waitSeconds = new Trend('wr_wait_seconds');
const etaError = new Trend('wr_eta_error_seconds'); // first known etaSeconds - actual wait
const firstPosition = new Trend('wr_first_position');
const polls = new Counter('wr_polls');
const positionWentUp = new Counter('wr_position_went_up');
const departures = new Counter('wr_departures'); // tagged how=leave|revoke|idle
// Sampler metrics (Trends, so that thresholds can use max).
const occupancy = new Trend('wr_occupancy');
const queueLength = new Trend('wr_queue_length');
const admittedLastMinute = new Trend('wr_admitted_last_minute');
const rateOvershoot = new Trend('wr_rate_overshoot');
const samples = new Counter('wr_samples');
const occupancyEnd = new Gauge('wr_occupancy_end');

// Longest a visitor can take: arrival, waiting, pages and checkout with the longest think times,
// and a slow last request.
const RUN_S = ARRIVAL_S + MAX_WAIT_S + (PAGES + 1) * THINK_S * 1.5 + 20;

const thresholds = {
  http_req_failed: ['rate==0'],
  checks: ['rate==1'],
  admitted_visitors: [`count>=${VISITORS}`],
};
if (FIFO) thresholds.wr_position_went_up = ['count==0'];
// The sampler's bounds hold room by room (one room: its metrics carry no room tag).
for (const room of ROOMS) {
  const of = (metric) => (room.id === null ? metric : `${metric}{room:${room.id}}`);
  thresholds[of('wr_occupancy')] = [`max<=${room.capacity}`];
  thresholds[of('wr_admitted_last_minute')] = [`max<=${room.rate + room.burst}`];
  thresholds[of('wr_rate_overshoot')] = ['max<=0'];
  thresholds[of('wr_samples')] = ['count>=1'];
  if (DRAIN) thresholds[of('wr_occupancy_end')] = ['value==0'];
}

export const options = {
  scenarios: {
    visitors: {
      executor: 'per-vu-iterations',
      exec: 'visitor',
      vus: VISITORS,
      iterations: 1,
      maxDuration: `${Math.ceil(RUN_S)}s`,
      gracefulStop: '5s',
    },
    admin: {
      executor: 'per-vu-iterations',
      exec: 'sampler',
      vus: 1,
      iterations: 1,
      maxDuration: `${Math.ceil(RUN_S + TAIL_S + 30)}s`,
      gracefulStop: '5s',
    },
  },
  thresholds,
  summaryTrendStats: ['avg', 'min', 'med', 'max', 'p(95)', 'p(99)'],
  userAgent: 'waitroom-k6-flashcrowd/1',
  setupTimeout: '30s',
};

const JSON_ACCEPT = { Accept: 'application/json' };
const HTML_ACCEPT = { Accept: 'text/html,application/xhtml+xml;q=0.9,*/*;q=0.8' };
const AUTH = { Authorization: `Bearer ${ADMIN_TOKEN}` };

// ------------------------------------------------------------------ helpers

/** The waiting-room JSON ({cfWaitingRoom, waitroom}) of a 200 answer, or null (the origin). */
function waitingRoomJson(res) {
  if (res.status !== 200 || typeof res.body !== 'string' || !res.body.startsWith('{')) return null;
  try {
    const body = JSON.parse(res.body);
    return body && body.cfWaitingRoom ? body : null;
  } catch (_) {
    return null;
  }
}

/** An answer from the waiting room rather than the origin (HTML page or JSON). */
function fromWaitingRoom(res) {
  return (
    res.headers.Refresh !== undefined ||
    (typeof res.body === 'string' && res.body.includes('cfWaitingRoom'))
  );
}

/** Tags of one room's samples: none with a single room, so that its thresholds read as before. */
function roomTags(room) {
  return room.id === null ? {} : { room: room.id };
}

function cookieValue(base, name) {
  const jar = http.cookieJar().cookiesForURL(`${base}/`);
  const values = jar[name];
  return values && values.length ? values[0] : '';
}

function leaveHow(index) {
  // 37 is coprime with 100: the mix is spread over arrival order instead of in blocks.
  const u = ((index * 37) % 100) / 100 + 0.005;
  for (const m of LEAVE_MIX) if (u <= m.upTo) return m.how;
  return LEAVE_MIX[LEAVE_MIX.length - 1].how;
}

// ------------------------------------------------------------------ lifecycle

export function setup() {
  const data = { rooms: {}, startedAt: Date.now() };
  for (const room of ROOMS) {
    const res = http.get(`${ADMIN}${room.state}`, { headers: AUTH, tags: { kind: 'admin' }, timeout: TIMEOUT });
    if (res.status !== 200) {
      throw new Error(`GET ${ADMIN}${room.state} answered ${res.status} ${res.error || ''}: check ADMIN, ADMIN_TOKEN and ROOMS`);
    }
    const s = res.json();
    const name = room.id === null ? 'the room' : `room ${room.id}`;
    check(s, {
      [`setup: ${name}: capacity is its total_active_users`]: (x) => x.total_active_users === room.capacity,
      [`setup: ${name}: rate is its new_users_per_minute`]: (x) => x.new_users_per_minute === room.rate,
      [`setup: ${name}: burst is its burst`]: (x) => x.burst === undefined || x.burst === room.burst,
    });
    if (s.total_active_users !== room.capacity || s.new_users_per_minute !== room.rate || (s.burst !== undefined && s.burst !== room.burst)) {
      console.warn(
        `${name} has total_active_users=${s.total_active_users} new_users_per_minute=${s.new_users_per_minute} ` +
          `burst=${s.burst}, but the script was told ${room.capacity}, ${room.rate}, ${room.burst}: the thresholds check the wrong bounds`,
      );
    }
    if (s.occupancy > 0 || s.queue_length > 0) {
      console.warn(`${name} is not empty at the start: occupancy ${s.occupancy}, queue ${s.queue_length}`);
    }
    data.rooms[room.id] = { admittedAtStart: s.admitted_total };
  }
  return data;
}

export function visitor() {
  const index = exec.scenario.iterationInTest; // 0 .. VISITORS-1
  const home = BASES[index % BASES.length];
  const base = () => (SPREAD === 'request' ? BASES[Math.floor(Math.random() * BASES.length)] : home);
  const how = leaveHow(index);
  const room = ROOMS[index % ROOMS.length];
  positionWentUp.add(0); // a Counter needs a sample for its threshold to be evaluated
  admittedVisitors.add(0);

  sleep((index / VISITORS) * ARRIVAL_S); // arrivals spread evenly over ARRIVAL seconds
  const arrived = Date.now();
  const deadline = arrived + MAX_WAIT_S * 1000;

  // Arrive, then poll until the answer is the shop.
  let res = http.get(`${base()}${room.entry}`, { headers: JSON_ACCEPT, tags: { kind: 'arrive' }, timeout: TIMEOUT });
  check(res, { 'arrive: status 200': (r) => r.status === 200 });
  let waiting = waitingRoomJson(res);
  let lastPosition = Infinity;
  let firstEta = null;
  let first = true;
  while (waiting || res.status !== 200) {
    if (waiting) {
      const wr = waiting.waitroom || {};
      check(waiting, {
        'poll: JSON says waiting': (b) => b.cfWaitingRoom.inWaitingRoom === true && wr.admitted !== true,
      });
      if (typeof wr.position === 'number') {
        if (first) firstPosition.add(wr.position);
        if (wr.position > lastPosition) positionWentUp.add(1, { base: base(), ...roomTags(room) });
        lastPosition = wr.position;
      }
      if (firstEta === null && typeof wr.etaSeconds === 'number') firstEta = { eta: wr.etaSeconds, at: Date.now() };
      first = false;
    }
    if (Date.now() >= deadline) {
      notAdmitted.add(1);
      console.warn(`visitor ${index}: not admitted after ${MAX_WAIT_S} s (last position ${lastPosition})`);
      return;
    }
    const refresh = waiting ? waiting.cfWaitingRoom.refreshIntervalSeconds : 1;
    sleep(POLL_S !== null ? POLL_S : refresh > 0 ? refresh : 1);
    res = http.get(`${base()}${room.entry}`, { headers: JSON_ACCEPT, tags: { kind: 'poll' }, timeout: TIMEOUT });
    polls.add(1);
    check(res, { 'poll: status 200': (r) => r.status === 200 });
    waiting = waitingRoomJson(res);
  }

  // Admitted: this answer came from the origin and carries the pass.
  const waited = (Date.now() - arrived) / 1000;
  admittedVisitors.add(1);
  waitSeconds.add(waited);
  if (firstEta !== null) etaError.add(firstEta.eta - (Date.now() - firstEta.at) / 1000);
  const passChecks = {
    'admitted: answer from the origin': (r) => !fromWaitingRoom(r),
    // The admitting answer itself sets the pass (the jar already held the ticket).
    'admitted: pass cookie set': (r) => (r.cookies[room.cookie] || []).some((c) => c.value !== ''),
  };
  if (ORIGIN_COOKIE) {
    passChecks["admitted: the origin's own cookie kept"] = (r) => (r.cookies[ORIGIN_COOKIE] || []).length > 0;
  }
  check(res, passChecks);

  // Browse.
  for (let p = 1; p <= PAGES; p++) {
    sleep(THINK_S * (0.5 + Math.random()));
    const page = http.get(`${base()}${room.pagePrefix}${p}`, {
      headers: HTML_ACCEPT,
      tags: { kind: 'page', name: `${room.pagePrefix}N` },
      timeout: TIMEOUT,
    });
    check(page, {
      'page: status 200': (r) => r.status === 200,
      'page: served by the origin, not the waiting room': (r) => !fromWaitingRoom(r),
    });
  }

  // Leave.
  departures.add(1, { how });
  if (how === 'leave') {
    const left = http.post(`${base()}${room.leave}`, null, { tags: { kind: 'leave' }, timeout: TIMEOUT });
    check(left, {
      'leave: status 200': (r) => r.status === 200,
      'leave: {"left": true}': (r) => {
        try {
          return r.json().left === true;
        } catch (_) {
          return false;
        }
      },
      'leave: cookie cleared': () => cookieValue(home, room.cookie) === '',
    });
  } else if (how === 'revoke') {
    sleep(THINK_S * (0.5 + Math.random()));
    const out = http.get(`${base()}${CHECKOUT_PATH}`, { headers: HTML_ACCEPT, tags: { kind: 'checkout' }, timeout: TIMEOUT });
    check(out, {
      'checkout: status 200': (r) => r.status === 200,
      'checkout: revoke header stripped': (r) => r.headers['Cf-Waiting-Room-Command'] === undefined,
      'checkout: cookie cleared': () => cookieValue(home, room.cookie) === '',
    });
  }
  // idle: just stop; the session ends after session_duration.
}

export function sampler(data) {
  const started = data && data.startedAt ? data.startedAt : Date.now();
  const history = new Map(ROOMS.map((room) => [room.id, []])); // {sent, total} of the last minute
  let doneAt = null;
  let sawVisitors = false;
  for (;;) {
    const sent = Date.now();
    let empty = true;
    for (const room of ROOMS) {
      const s = sample(room, history.get(room.id), started, sent);
      if (s === null || s.occupancy !== 0 || s.queue_length !== 0) empty = false;
    }
    // Every visitor VU is done when only this one is still active (once they have started).
    const active = exec.instance.vusActive;
    if (active > 1) sawVisitors = true;
    if (doneAt === null && sawVisitors && active <= 1) doneAt = Date.now();
    if (doneAt !== null && (empty || Date.now() - doneAt >= TAIL_S * 1000)) break;
    sleep(Math.max(0, SAMPLE_S - (Date.now() - sent) / 1000));
  }
}

/** One room's state, recorded with its tags; null when the admin API did not answer. */
function sample(room, history, started, round) {
  const sent = Date.now();
  const res = http.get(`${ADMIN}${room.state}`, { headers: AUTH, tags: { kind: 'admin' }, timeout: TIMEOUT });
  const recv = Date.now();
  if (!check(res, { 'admin state: status 200': (r) => r.status === 200 })) return null;
  const s = res.json();
  const tags = roomTags(room);
  samples.add(1, tags);
  occupancy.add(s.occupancy, tags);
  queueLength.add(s.queue_length, tags);
  admittedLastMinute.add(s.admitted_last_minute, tags);
  occupancyEnd.add(s.occupancy, tags);
  // Token bucket: admissions in any window <= burst + rate x window. The snapshot was taken
  // between sent and recv, so (this recv - that sent) bounds the window from above.
  let worst = null;
  for (const h of history) {
    const window = (recv - h.sent) / 1000;
    const excess = s.admitted_total - h.total - (room.burst + (room.rate * window) / 60);
    if (worst === null || excess > worst) worst = excess;
  }
  if (worst !== null) rateOvershoot.add(worst, tags);
  history.push({ sent, total: s.admitted_total });
  while (history.length && recv - history[0].sent > 60000) history.shift();
  console.log(
    `SERIES,${new Date(round).toISOString()},${s.occupancy},${s.queue_length},${s.admitted_last_minute},` +
      `${((round - started) / 1000).toFixed(1)},${s.admitted_total}${room.id === null ? '' : `,${room.id}`}`,
  );
  return s;
}
