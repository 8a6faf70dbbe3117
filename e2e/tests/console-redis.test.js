'use strict';
// (p) The console on two proxies sharing Redis: signed in on proxy A while a crowd comes through
//     proxy B only (a room of 2: two let in, two in line, a checkout calling the first in line),
//     A's live view shows the room from the store (B's crowd inside and waiting, the leader as B
//     names it), and A's drop report counts B's admissions and joins, and, once B has published
//     its share (every 5 s), the requests B forwarded to its shop and the pass B's checkout
//     ended (`shares_merged`), in the JSON and on the console (its report and live view).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const {
  useBrowser,
  newContext,
  roomFor,
  redisFor,
  eventually,
  textOf,
  ADMIN_TOKEN,
  VIEWPORTS,
} = require('../lib/harness');

const browser = useBrowser();
const AUTH = { authorization: `Bearer ${ADMIN_TOKEN}` };

async function report(room) {
  const r = await fetch(`${room.adminBase}/admin/report`, { headers: AUTH });
  if (!r.ok) throw new Error(`GET /admin/report: ${r.status} ${await r.text()}`);
  return r.json();
}

test('(p) console on two proxies sharing Redis: A shows and reports the crowd that came through B', async (t) => {
  const redis = await redisFor(t);
  const shared = { room: { total_active_users: 2 }, sections: { store: { backend: 'redis', url: redis.url } } };
  const a = await roomFor(t, shared);
  const b = await roomFor(t, shared);
  // Each history starts at its loop's first reading (and B's shares with it): the crowd after.
  for (const proxy of [a, b]) {
    await eventually('a first minute recorded', async () => (await report(proxy)).rooms[0].minutes >= 1, {
      timeout: 15000,
      every: 200,
    });
  }

  const context = await newContext(t, browser(), VIEWPORTS.desktop);
  const page = await context.newPage();
  await page.goto(`${a.adminBase}/admin/console`);
  await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await eventually('the live view', async () => (await textOf(page, '#live')).startsWith('live'));
  const card = page.locator('section.room').first();
  const figure = (name) => card.locator(`[data-field="${name}"]`).textContent();

  // The crowd, through B alone: two in, two in line.
  const crowd = [];
  for (let i = 0; i < 4; i++) {
    const visitor = b.visitor();
    assert.equal((await visitor.get(`/product/${i}`)).body.includes('Shop page'), i < 2, `visitor ${i} on B`);
    crowd.push(visitor);
  }
  await eventually('A showing B\'s crowd', async () => (await figure('inside')) === '2 / 2' && (await figure('waiting')) === '2');
  assert.equal(await figure('store'), 'up');
  // Whichever instance leads, A names the same leader as B does.
  const bState = await b.state();
  const aState = await a.state();
  assert.notEqual(aState.instance, bState.instance);
  assert.equal(aState.leader, bState.leader, 'one leader for the room');
  const leader = aState.is_leader ? `this instance (${aState.instance})` : bState.leader;
  await eventually(`A's live view naming the leader ${leader}`, async () => (await figure('leader')) === leader);
  t.diagnostic(`leader: ${aState.is_leader ? 'A' : 'B'} (${bState.leader})`);

  // A checkout on B frees a place: the first in line (B's) is called and goes in through B.
  assert.match((await crowd[0].get('/checkout')).body, /Shop page/);
  await eventually('the line moving up on A', async () => (await figure('waiting')) === '1' && (await figure('inside')) === '2 / 2');
  await eventually('the first in line in, on B', async () => (await crowd[2].get('/product/2')).body.includes('Shop page'), {
    every: 200,
  });
  assert.equal(a.shop.seen.length, 0, 'nothing reached the shop through A');
  const forwarded = b.shop.seen.length;
  t.diagnostic(`B forwarded ${forwarded} requests: ${b.shop.seen.map((s) => s.path).join(' ')}`);

  // A's report: the store's counts at once (three admitted, two joined), and within a few of
  // B's publications its share: what it forwarded, the pass its checkout ended.
  const started = Date.now();
  const room = await eventually('A\'s report with B\'s share', async () => {
    const r = (await report(a)).rooms[0];
    return r.admitted === 3 && r.joined === 2 && r.origin.requests === forwarded && r.revoked.ended === 1 && r;
  }, { timeout: 20000, every: 250 });
  t.diagnostic(`A's report counted B's share ${Date.now() - started} ms after the last request`);
  assert.equal(room.shares_merged, true, JSON.stringify(room));
  assert.equal(room.shares_error, undefined);
  assert.equal(room.origin.errors, 0);
  // B's own report agrees (the line's figures are the store's; the rest its own share).
  const own = (await report(b)).rooms[0];
  assert.equal(own.admitted, 3);
  assert.equal(own.origin.requests, forwarded);

  // The console on A shows the same once it fetches the report again.
  const reportSection = page.locator('section', { has: page.getByRole('heading', { name: 'Drop report' }) });
  await eventually('A\'s console with B\'s share', async () => {
    await reportSection.getByRole('button', { name: 'Refresh the report' }).click();
    const rows = {};
    for (const row of await page.locator('#report > div').first().locator('dl.figures > div').all()) {
      rows[(await row.locator('dt').textContent()).trim()] = (await row.locator('dd').textContent()).trim();
    }
    return rows.Admitted === '3' && rows['Joined the line'] === '2' &&
      rows["Shop's server errors"] === `0.00 % of ${forwarded}` && (await figure('revoked')) === '1 / 0';
  }, { every: 500 });
  assert.match(await figure('counted'), /the whole room's/);
});
