'use strict';
// (e) queueing_method = "reject", switched on live: the browser gets the static closed page,
//     with no Refresh header and no polling.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { useBrowser, newContext, roomFor, eventually, sleep } = require('../lib/harness');

const browser = useBrowser();

test('(e) the reject page is static: no Refresh header, no script, no polling', async (t) => {
  const room = await roomFor(t, { room: { refresh_interval: '1s' } });
  await room.putConfig({ queueing_method: 'reject' });
  await eventually('reject to apply', async () => (await room.state()).queueing_method === 'reject');

  const context = await newContext(t, browser());
  const page = await context.newPage();
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  const resp = await page.goto(`${room.base}/product/42`);
  assert.equal(resp.status(), 200); // queueing_status_code, default 200
  const headers = resp.headers();
  assert.equal(headers['refresh'], undefined, 'the closed page must not refresh');
  assert.equal(await page.title(), 'This drop is closed · Sneaker drop');
  assert.equal(await page.textContent('h1'), 'This drop is closed');
  assert.match(await page.textContent('main'), /There is nothing left to queue for/);
  assert.equal(await page.$$eval('script', (s) => s.length), 0);
  assert.equal(await page.$$eval('meta[http-equiv]', (m) => m.length), 0);
  assert.equal(await page.$('#wr'), null);
  assert.equal((await context.cookies(room.base)).length, 0, 'a closed room sets no cookie');
  assert.ok(!(await resp.text()).includes('__waitroom'), 'the closed page mentions a reserved path');

  // Three refresh intervals later: still the one document request, nothing polled or reloaded.
  await sleep(3200);
  assert.deepEqual(requests, [`${room.base}/product/42`]);
  assert.equal(page.url(), `${room.base}/product/42`);

  // A Cloudflare JSON client is told the same thing: in the room, refresh 0, reject queue.
  const json = await page.evaluate(async () => {
    const r = await fetch(location.href, { headers: { Accept: 'application/json' } });
    return { status: r.status, refresh: r.headers.get('refresh'), body: await r.json() };
  });
  assert.equal(json.refresh, null);
  assert.equal(json.body.cfWaitingRoom.refreshIntervalSeconds, 0);
  assert.equal(json.body.cfWaitingRoom.isRejectQueue, true);
  assert.equal(json.body.cfWaitingRoom.queueingMethod, 'reject');
  assert.equal(json.body.cfWaitingRoom.inWaitingRoom, true);
});
