'use strict';
// (a) The waiting page follows the line by itself and brings the visitor in without any reload
//     by the test. (c) Two tabs of one browser share one place. (d) A page refused an event
//     stream (listen.max_event_streams) polls instead and still follows the line.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const {
  useBrowser,
  newContext,
  roomFor,
  takeTheOnlyPlace,
  shownNumber,
  eventually,
  sleep,
} = require('../lib/harness');

const browser = useBrowser();

const numberIs = (page, n, timeout) =>
  page.waitForFunction(
    (want) => {
      const el = document.querySelector('#wr-place .num');
      return !!el && el.textContent.trim() === want;
    },
    String(n),
    { timeout },
  );

// The proxy also sends `Refresh: <refresh_interval>`, which Chromium obeys with JavaScript on
// too. With refresh_interval = 30 s nothing in this test can come from that header: every update
// and the final admission below are the page script's doing.
test('(a) a waiting visitor sees its place move live and is let in by the page itself', async (t) => {
  const room = await roomFor(t, { room: { refresh_interval: '30s' } });
  const holder = await takeTheOnlyPlace(room);

  // Someone queued before our visitor.
  const first = room.visitor();
  const ahead = await first.getJson('/product/7');
  assert.equal(JSON.parse(ahead.body).waitroom.position, 1);

  const context = await newContext(t, browser());
  const page = await context.newPage();
  const navigations = [];
  page.on('framenavigated', (f) => {
    if (f === page.mainFrame()) navigations.push(f.url());
  });

  const resp = await page.goto(`${room.base}/product/42`);
  assert.equal(resp.status(), 200);
  assert.equal(resp.headers()['refresh'], '30');
  assert.match(resp.headers()['cache-control'] || '', /no-store/);
  assert.equal(await shownNumber(page), '2');
  assert.match(await page.title(), /^#2 in line · /);
  assert.match(await page.textContent('#wr-sub'), /2 people waiting in total/);
  assert.equal((await room.state()).queue_length, 2);

  // The first waiter gives up its place: our page moves to 1 by itself, in the same document.
  await page.evaluate(() => {
    window.__sameDocument = 'yes';
  });
  const left = await first.leave();
  assert.equal(left.status, 200);
  assert.deepEqual(JSON.parse(left.body), { left: true });
  await numberIs(page, 1, 8000);
  assert.equal(await page.evaluate(() => window.__sameDocument), 'yes', 'the page was reloaded');
  assert.match(await page.title(), /^#1 in line · /);
  assert.equal((await room.state()).queue_length, 1);

  // The holder checks out: the shop's revoke command frees the place at once...
  const checkout = await holder.get('/checkout');
  assert.equal(checkout.status, 200);
  assert.match(checkout.body, /Shop page \/checkout/);
  assert.equal(checkout.headers.get('cf-waiting-room-command'), null, 'the command leaked');
  assert.equal(holder.cookie, null, 'the revoke did not clear the cookie');
  const freedAt = Date.now();

  // ...and the waiting page takes the visitor in on its own (the test never reloads).
  await page.getByRole('heading', { name: 'Shop page /product/42' }).waitFor({ timeout: 10000 });
  const tookMs = Date.now() - freedAt;
  assert.equal(page.url(), `${room.base}/product/42`);
  assert.equal(await page.title(), 'Shop page /product/42');
  // Exactly two documents: the test's goto and the script's reload on admission.
  assert.deepEqual(navigations, [`${room.base}/product/42`, `${room.base}/product/42`]);
  const cookies = await context.cookies(room.base);
  assert.ok(cookies.some((c) => c.name === 'waitroom' && c.value), 'no pass cookie');
  const state = await room.state();
  assert.equal(state.queue_length, 0);
  assert.equal(state.occupancy, 1);
  t.diagnostic(`admitted ${tookMs} ms after the slot was freed`);
});

test('(a) without EventSource the page polls /__waitroom/status and still gets in', async (t) => {
  const room = await roomFor(t, { room: { refresh_interval: '2s' } });
  const holder = await takeTheOnlyPlace(room);
  const first = room.visitor();
  await first.get('/product/7');

  const context = await newContext(t, browser());
  // An old browser: no EventSource. And the Refresh header is taken off the waiting page, so
  // only the script's polling can move the page along.
  await context.addInitScript(() => {
    delete window.EventSource;
  });
  await context.route('**/product/42', async (route) => {
    const response = await route.fetch();
    const headers = { ...response.headers() };
    delete headers.refresh;
    await route.fulfill({ response, headers });
  });
  const page = await context.newPage();
  const requests = [];
  page.on('request', (r) => requests.push(new URL(r.url()).pathname));
  const resp = await page.goto(`${room.base}/product/42`);
  assert.equal(resp.headers()['refresh'], undefined);
  assert.equal(await shownNumber(page), '2');
  await page.evaluate(() => {
    window.__sameDocument = 'yes';
  });

  await first.leave();
  await numberIs(page, 1, 8000);
  assert.equal(await page.evaluate(() => window.__sameDocument), 'yes', 'the page was reloaded');
  assert.ok(requests.includes('/__waitroom/status'), requests.join(' '));
  assert.ok(!requests.includes('/__waitroom/events'), requests.join(' '));

  await holder.get('/checkout');
  await page.getByRole('heading', { name: 'Shop page /product/42' }).waitFor({ timeout: 10000 });
  assert.equal(page.url(), `${room.base}/product/42`);
  assert.equal((await room.state()).occupancy, 1);
});

test('(c) two tabs share one place in line', async (t) => {
  const room = await roomFor(t);
  const holder = await takeTheOnlyPlace(room);

  const context = await newContext(t, browser());
  const tab1 = await context.newPage();
  const tab2 = await context.newPage();
  await tab1.goto(`${room.base}/product/42`);
  await tab2.goto(`${room.base}/product/43`);
  assert.equal(await shownNumber(tab1), '1');
  assert.equal(await shownNumber(tab2), '1');
  assert.equal((await room.state()).queue_length, 1);

  // Both pages keep polling and listening for a while: still one place, still number 1.
  await sleep(2500);
  assert.equal(await shownNumber(tab1), '1');
  assert.equal(await shownNumber(tab2), '1');
  const state = await room.state();
  assert.equal(state.queue_length, 1);

  // When the place frees, both tabs get in on the one shared admission.
  await holder.get('/checkout');
  await tab1.getByRole('heading', { name: 'Shop page /product/42' }).waitFor({ timeout: 10000 });
  await tab2.getByRole('heading', { name: 'Shop page /product/43' }).waitFor({ timeout: 10000 });
  await eventually('one visitor inside', async () => {
    const s = await room.state();
    return s.occupancy === 1 && s.queue_length === 0;
  });
});

test('(d) beyond listen.max_event_streams a page polls at the refresh interval and still follows the line', async (t) => {
  const room = await roomFor(t, {
    listen: { max_event_streams: 1 },
    room: { refresh_interval: '2s' },
  });
  await takeTheOnlyPlace(room);
  const first = room.visitor();
  await first.get('/product/7');
  const pathOf = (r) => new URL(r.url()).pathname;

  // The first page takes the proxy's only event stream.
  const streaming = await newContext(t, browser());
  const pageA = await streaming.newPage();
  const streamA = pageA.waitForResponse((r) => pathOf(r) === '/__waitroom/events');
  await pageA.goto(`${room.base}/product/42`);
  assert.equal((await streamA).status(), 200);
  assert.equal(await shownNumber(pageA), '2');

  // The second page is refused one, and without the Refresh header only its polling can move it.
  const polling = await newContext(t, browser());
  await polling.route('**/product/43', async (route) => {
    const response = await route.fetch();
    const headers = { ...response.headers() };
    delete headers.refresh;
    await route.fulfill({ response, headers });
  });
  const pageB = await polling.newPage();
  const requests = [];
  pageB.on('request', (r) => requests.push(pathOf(r)));
  const streamB = pageB.waitForResponse((r) => pathOf(r) === '/__waitroom/events');
  await pageB.goto(`${room.base}/product/43`);
  const refused = await streamB;
  // 204: an EventSource stops for good (no reconnection), and the page polls instead.
  assert.equal(refused.status(), 204);
  assert.equal(refused.headers()['retry-after'], '2');
  assert.equal(refused.headers()['x-waitroom-stream'], 'refused; reason=proxy');
  assert.equal(await shownNumber(pageB), '3');
  await pageB.evaluate(() => {
    window.__sameDocument = 'yes';
  });

  // Someone ahead leaves: both pages move, the streamed one and the polling one.
  await first.leave();
  await numberIs(pageA, 1, 8000);
  await numberIs(pageB, 2, 8000);
  assert.equal(await pageB.evaluate(() => window.__sameDocument), 'yes', 'the page was reloaded');
  assert.ok(requests.includes('/__waitroom/status'), requests.join(' '));
  assert.equal(
    requests.filter((p) => p === '/__waitroom/events').length,
    1,
    `one refused stream, then polls: ${requests.join(' ')}`,
  );
});
