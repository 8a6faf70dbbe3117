'use strict';
// (g) axe-core finds no serious or critical violation on the waiting page and the closed page,
//     on a desktop and a phone. The same pages are saved as the README's screenshots.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const {
  useBrowser,
  newContext,
  roomFor,
  takeTheOnlyPlace,
  shownNumber,
  screenshot,
  eventually,
  VIEWPORTS,
  seriousViolations,
} = require('../lib/harness');

const browser = useBrowser();


test('(g) waiting and closed pages: no serious or critical axe violation; screenshots', async (t) => {
  // refresh_interval as in production, so no Refresh reload lands between load and screenshot.
  const room = await roomFor(t, { room: { refresh_interval: '20s' } });
  await takeTheOnlyPlace(room);
  // A few people ahead, two of whom give up once our visitor is in line: the page then shows a
  // place mid-line with some progress, as a real visitor would see it.
  const ahead = [];
  for (let i = 0; i < 4; i++) {
    const v = room.visitor();
    await v.get(`/product/${i + 100}`);
    ahead.push(v);
  }

  const desktop = await newContext(t, browser(), VIEWPORTS.desktop);
  const page = await desktop.newPage();
  await page.goto(`${room.base}/product/42`);
  assert.equal(await shownNumber(page), '5');
  await ahead[0].leave();
  await ahead[1].leave();
  await eventually('the line to move', async () => (await room.state()).queue_length === 3);

  // The wait estimate needs a few seconds of samples: wait for it (if it comes) so that both
  // screenshots show the same, fuller page.
  await eventually(
    'a known wait estimate',
    async () => JSON.parse((await ahead[2].getJson('/product/102')).body).cfWaitingRoom.waitTimeKnown,
    { timeout: 8000, every: 250 },
  ).catch((e) => t.diagnostic(`screenshots without an estimate: ${e.message}`));

  const cookies = await desktop.cookies(room.base);
  for (const [name, options] of Object.entries(VIEWPORTS)) {
    const context = name === 'desktop' ? desktop : await newContext(t, browser(), options);
    if (context !== desktop) await context.addCookies(cookies);
    const p = await context.newPage();
    const resp = await p.goto(`${room.base}/product/42`);
    assert.equal(resp.status(), 200);
    assert.equal(await shownNumber(p), '3', `${name}: shared place`);
    assert.deepEqual(await seriousViolations(t, p, `waiting/${name}`), [], `waiting page on ${name}`);
    await screenshot(p, `waiting-${name}.png`);
    await p.close();
  }
  assert.equal((await room.state()).queue_length, 3);

  await room.putConfig({ queueing_method: 'reject' });
  await eventually('reject to apply', async () => (await room.state()).queueing_method === 'reject');
  for (const [name, options] of Object.entries(VIEWPORTS)) {
    const context = await newContext(t, browser(), options);
    const p = await context.newPage();
    await p.goto(`${room.base}/product/42`);
    assert.equal(await p.textContent('h1'), 'This drop is closed');
    assert.deepEqual(await seriousViolations(t, p, `closed/${name}`), [], `closed page on ${name}`);
    await screenshot(p, `closed-${name}.png`);
  }
});
