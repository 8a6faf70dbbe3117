'use strict';
// Shared plumbing of the browser tests: the real proxy binary on free ports in front of the stub
// shop, a cookie-keeping HTTP visitor, the admin API and headless Chromium.

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const net = require('node:net');
const { spawn } = require('node:child_process');
const { setTimeout: sleep } = require('node:timers/promises');

const { chromium } = require('playwright-core');
const { startShop } = require('../stub-shop');

const REPO = path.resolve(__dirname, '..', '..');
const BIN = path.resolve(REPO, process.env.WAITROOM_BIN || 'target/debug/waitroom-proxy');
const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
const SCREENSHOTS = path.join(REPO, 'docs', 'screenshots');

const SECRET = 'e2e-secret-e2e-secret-e2e-secret-e2e!!';
const ADMIN_TOKEN = 'e2e-admin-token-e2e-admin-token-e2e!!';
const COOKIE = 'waitroom';

// Every child process still alive when this test process exits is killed, whatever happened
// (a failed test, an exception, or the runner's timeout signalling us).
const children = new Set();
function killChildren() {
  for (const child of children) {
    try {
      child.kill('SIGKILL');
    } catch {}
  }
}
process.on('exit', killChildren);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    killChildren();
    process.exit(130);
  });
}

// Free ports for one proxy, all held open at once until each is known: ports asked for one after
// another can come back the same (the kernel hands out a port again once it is closed), and two
// listeners on one port is a config the proxy refuses.
async function freePorts(count) {
  const servers = [];
  try {
    for (let i = 0; i < count; i += 1) {
      const srv = net.createServer();
      srv.unref();
      servers.push(srv);
      await new Promise((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(0, '127.0.0.1', resolve);
      });
    }
    return servers.map((srv) => srv.address().port);
  } finally {
    await Promise.all(servers.map((srv) => new Promise((resolve) => srv.close(() => resolve()))));
  }
}

function accepts(port) {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1' });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

/** Polls `check` (sync or async) every `every` ms until it returns truthy; returns that value. */
async function eventually(what, check, { timeout = 10000, every = 50 } = {}) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      last = await check();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) {
      throw new Error(`timed out after ${timeout} ms waiting for: ${what} (last: ${String(last)})`);
    }
    await sleep(every);
  }
}

function tomlValue(v) {
  if (Array.isArray(v)) return `[${v.map(tomlValue).join(', ')}]`;
  if (typeof v === 'string') return JSON.stringify(v);
  return String(v);
}

function tomlSection(name, obj) {
  return [`[${name}]`, ...Object.entries(obj).map(([k, v]) => `${k} = ${tomlValue(v)}`)].join('\n');
}

/**
 * Starts the stub shop and `$WAITROOM_BIN --config FILE` on free ports; resolves once both
 * listeners of the proxy accept. `listen`, `room` and `page` override keys of those sections.
 */
async function startRoom({ listen: listenKeys = {}, room = {}, page = {}, sections = {} } = {}) {
  if (!fs.existsSync(BIN)) {
    throw new Error(`no proxy binary at ${BIN}: build it (cargo build) or set WAITROOM_BIN`);
  }
  const shop = await startShop(0);
  const [listen, admin] = await freePorts(2);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'waitroom-e2e-'));
  const configFile = path.join(dir, 'room.toml');
  const logFile = path.join(dir, 'proxy.log');
  const text = [
    tomlSection('listen', { address: `127.0.0.1:${listen}`, threads: 2, ...listenKeys }),
    tomlSection('origin', {
      address: shop.address,
      connect_timeout: '1s',
      read_timeout: '5s',
    }),
    tomlSection('room', {
      id: 'e2e-room',
      name: 'E2E drop',
      total_active_users: 1,
      new_users_per_minute: 600,
      session_duration: '5m',
      admission_interval: '50ms',
      refresh_interval: '2s',
      abandon_after: '1m',
      enabled_origin_commands: ['revoke'],
      ...room,
    }),
    tomlSection('pass', { secret: SECRET, cookie_secure: false }),
    tomlSection('admin', { address: `127.0.0.1:${admin}`, token: ADMIN_TOKEN }),
    tomlSection('page', { title: 'Sneaker drop', ...page }),
    // More top-level sections, e.g. { proof_of_work: { enabled: true } }, or
    // { store: { backend: 'redis', url: redis.url } } (startRedis) for proxies sharing a room.
    ...Object.entries(sections).map(([name, keys]) => tomlSection(name, keys)),
    // [rate_limit] stays at its defaults, as in front of a shop: a test makes a handful of
    // visitors from 127.0.0.1, far below them.
    '',
  ].join('\n\n');
  fs.writeFileSync(configFile, text);

  const log = fs.openSync(logFile, 'a');
  const child = spawn(BIN, ['--config', configFile], {
    stdio: ['ignore', log, log],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG || 'info' },
  });
  fs.closeSync(log);
  children.add(child);
  let exited = null;
  const exitedPromise = new Promise((resolve) =>
    child.once('exit', (code, signal) => {
      exited = { code, signal };
      children.delete(child);
      resolve(exited);
    }),
  );
  const logTail = () => {
    try {
      return fs.readFileSync(logFile, 'utf8').split('\n').slice(-40).join('\n');
    } catch {
      return '';
    }
  };

  const stop = async () => {
    if (!exited) {
      child.kill('SIGINT');
      const quick = await Promise.race([exitedPromise, sleep(2000, null, { ref: false })]);
      if (!quick) {
        child.kill('SIGKILL');
        await exitedPromise;
      }
    }
    await shop.close();
    if (!process.env.E2E_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
  };

  try {
    await eventually(
      'the proxy to listen',
      async () => {
        if (exited) throw new Error(`proxy exited early (${JSON.stringify(exited)}):\n${logTail()}`);
        return (await accepts(listen)) && (await accepts(admin));
      },
      { timeout: 15000, every: 25 },
    );
  } catch (e) {
    await stop();
    if (e.message.includes('proxy exited early')) throw e;
    throw new Error(`${e.message}\n${logTail()}`);
  }

  const base = `http://127.0.0.1:${listen}`;
  const adminBase = `http://127.0.0.1:${admin}`;
  return {
    base,
    adminBase,
    shop,
    configText: text,
    logTail,
    stop,
    visitor: () => new Visitor(base),
    async state() {
      const r = await fetch(`${adminBase}/admin/state`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
      });
      if (!r.ok) throw new Error(`GET /admin/state: ${r.status} ${await r.text()}`);
      return r.json();
    },
    async putConfig(obj) {
      const r = await fetch(`${adminBase}/admin/config`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
        body: JSON.stringify(obj),
      });
      const body = await r.text();
      if (!r.ok) throw new Error(`PUT /admin/config ${JSON.stringify(obj)}: ${r.status} ${body}`);
      return body;
    },
  };
}

/**
 * A `redis-server` of its own (`$REDIS_SERVER`, default `redis-server` on the PATH) on a free
 * port of 127.0.0.1, keeping nothing on disk; resolves once it accepts connections. `url` is
 * for `[store] url`; `stop()` ends it (and the test process's exit does, whatever happened).
 */
async function startRedis() {
  const [port] = await freePorts(1);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'waitroom-e2e-redis-'));
  const logFile = path.join(dir, 'redis.log');
  const log = fs.openSync(logFile, 'a');
  const child = spawn(
    process.env.REDIS_SERVER || 'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: ['ignore', log, log] },
  );
  fs.closeSync(log);
  children.add(child);
  let exited = null;
  let spawnError = null;
  child.once('error', (e) => {
    spawnError = e;
  });
  const exitedPromise = new Promise((resolve) =>
    child.once('close', (code, signal) => {
      exited = { code, signal };
      children.delete(child);
      resolve(exited);
    }),
  );
  const stop = async () => {
    if (!exited && !spawnError) {
      child.kill('SIGTERM');
      if (!(await Promise.race([exitedPromise, sleep(2000, null, { ref: false })]))) {
        child.kill('SIGKILL');
        await exitedPromise;
      }
    }
    if (!process.env.E2E_KEEP_TMP) fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    await eventually(
      'redis-server to listen',
      async () => {
        if (spawnError) {
          throw new Error(`cannot run redis-server (${spawnError.message}): apt-get install redis-server (scripts/setup.sh does)`);
        }
        if (exited) throw new Error(`redis-server exited early (${JSON.stringify(exited)}):\n${fs.readFileSync(logFile, 'utf8')}`);
        return accepts(port);
      },
      { timeout: 10000, every: 25 },
    );
  } catch (e) {
    await stop();
    throw e;
  }
  return { port, url: `redis://127.0.0.1:${port}/0`, stop };
}

/** A plain HTTP visitor that keeps the waiting-room cookie like a browser would. */
class Visitor {
  constructor(base) {
    this.base = base;
    this.cookie = null;
  }

  async request(method, pathname, { accept } = {}) {
    const headers = {};
    if (this.cookie) headers.cookie = `${COOKIE}=${this.cookie}`;
    if (accept) headers.accept = accept;
    const r = await fetch(this.base + pathname, { method, headers, redirect: 'manual' });
    const body = await r.text();
    for (const set of r.headers.getSetCookie()) {
      if (!set.startsWith(`${COOKIE}=`)) continue;
      const value = set.slice(COOKIE.length + 1).split(';')[0];
      this.cookie = /max-age=0\b/i.test(set) || !value ? null : value;
    }
    return { status: r.status, headers: r.headers, body };
  }

  get(pathname, opts) {
    return this.request('GET', pathname, opts);
  }

  getJson(pathname) {
    return this.request('GET', pathname, { accept: 'application/json' });
  }

  leave() {
    return this.request('POST', '/__waitroom/leave');
  }
}

const LAUNCH_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Debian's Chromium, driven by playwright-core; Playwright gives it a fresh user-data-dir. */
async function launchBrowser() {
  if (!fs.existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium (run.sh does)`);
  }
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: LAUNCH_ARGS });
}

const VIEWPORTS = {
  desktop: { viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 },
  phone: { viewport: { width: 390, height: 844 }, deviceScaleFactor: 1, isMobile: true, hasTouch: true },
};

/**
 * Runs `fn` again while it fails because the page navigated under it: the waiting page is
 * reloaded by its Refresh header (and by its script on admission) whenever it likes.
 */
async function settled(fn, { tries = 30 } = {}) {
  for (let i = 0; ; i++) {
    try {
      return await fn();
    } catch (e) {
      const navigated = /Execution context was destroyed|navigat|Target closed|frame was detached/i;
      if (i >= tries || !navigated.test(String(e && e.message))) throw e;
      await sleep(100);
    }
  }
}

/** The big number on the waiting page ("1", "2", ...); waits up to 3 s for it to be there. */
async function shownNumber(page) {
  return settled(async () =>
    (await page.locator('#wr-place .num').first().textContent({ timeout: 3000 })).trim(),
  );
}

/** The text of the first element matching `selector`, whatever navigation happens meanwhile. */
async function textOf(page, selector) {
  return settled(async () =>
    (await page.locator(selector).first().textContent({ timeout: 3000 })).replace(/\s+/g, ' ').trim(),
  );
}

async function screenshot(page, name) {
  fs.mkdirSync(SCREENSHOTS, { recursive: true });
  const file = path.join(SCREENSHOTS, name);
  await page.screenshot({ path: file, animations: 'disabled', caret: 'hide' });
  return file;
}

module.exports = {
  REPO,
  BIN,
  ADMIN_TOKEN,
  COOKIE,
  SCREENSHOTS,
  VIEWPORTS,
  startRoom,
  startRedis,
  launchBrowser,
  eventually,
  shownNumber,
  textOf,
  settled,
  screenshot,
  sleep,
  Visitor,
};

/**
 * One Chromium for the tests of a file: call at the top level of a test file; the returned
 * function gives the browser inside a test. Closed after the file's tests, even on failure.
 */
function useBrowser() {
  const { before, after } = require('node:test');
  let browser = null;
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    if (browser) await browser.close();
  });
  return () => browser;
}

// node:test runs a test's after-hooks in the order they were added; cleanups must run the other
// way round (close the browser context before stopping the proxy it is connected to).
const cleanups = new WeakMap();
function defer(t, fn) {
  let stack = cleanups.get(t);
  if (!stack) {
    stack = [];
    cleanups.set(t, stack);
    t.after(async () => {
      const errors = [];
      while (stack.length) {
        try {
          await stack.pop()();
        } catch (e) {
          errors.push(e);
        }
      }
      if (errors.length) throw errors[0];
    });
  }
  stack.push(fn);
}

/** A new browser context closed when the test ends. */
async function newContext(t, browser, options = {}) {
  const context = await browser.newContext(options);
  defer(t, () => context.close());
  return context;
}

/** Starts a room for one test and stops it (proxy and shop) when the test ends. */
async function roomFor(t, options) {
  const room = await startRoom(options);
  defer(t, () => room.stop());
  return room;
}

/** Starts a redis-server for one test and stops it when the test ends (after the proxies using it). */
async function redisFor(t) {
  const redis = await startRedis();
  defer(t, () => redis.stop());
  return redis;
}

/** A visitor who takes the room's only place (total_active_users = 1) and keeps it. */
async function takeTheOnlyPlace(room, pathname = '/product/1') {
  const holder = room.visitor();
  const r = await holder.get(pathname);
  if (!r.body.includes(`Shop page ${pathname}`) || !holder.cookie) {
    throw new Error(`the holder was not admitted: ${r.status} ${r.body.slice(0, 200)}`);
  }
  return holder;
}

/**
 * The serious and critical axe-core violations on `page` (each one, of any impact, is printed
 * as a diagnostic under `label`): what the accessibility checks of every page assert empty.
 */
async function seriousViolations(t, page, label) {
  await page.addScriptTag({ path: require.resolve('axe-core/axe.min.js') });
  const violations = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const result = await axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      nodes: v.nodes.map((n) => `${n.target.join(' ')}: ${n.failureSummary}`),
    }));
  });
  for (const v of violations) {
    t.diagnostic(`${label}: ${v.impact} ${v.id} (${v.help}) on ${v.nodes.length} node(s)`);
  }
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

module.exports.useBrowser = useBrowser;
module.exports.seriousViolations = seriousViolations;
module.exports.defer = defer;
module.exports.newContext = newContext;
module.exports.roomFor = roomFor;
module.exports.redisFor = redisFor;
module.exports.takeTheOnlyPlace = takeTheOnlyPlace;
