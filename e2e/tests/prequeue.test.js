'use strict';
// (i) A scheduled drop: during the pre-queue an empty room still queues everyone and the page counts
//     down to the start on the server's clock; at the start the page reloads by itself and the
//     visitor is let in. The countdown is screenshotted for the docs.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { ADMIN_TOKEN, useBrowser, newContext, roomFor, eventually, screenshot } = require('../lib/harness');

const browser = useBrowser();

test('(i) the pre-queue counts down, then the page lets the visitor in by itself', async (t) => {
  const room = await roomFor(t, { room: { total_active_users: 100 } });
  const now = Date.now();
  const startsIn = 8000;
  const r = await fetch(`${room.adminBase}/admin/events`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${ADMIN_TOKEN}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({
      name: 'air-max-drop',
      prequeue_start_time: new Date(now - 1000).toISOString(),
      event_start_time: new Date(now + startsIn).toISOString(),
      event_end_time: new Date(now + 3600000).toISOString(),
      shuffle_at_event_start: true,
      heading: 'Air Max 1: the drop opens soon',
    }),
  });
  assert.equal(r.status, 201, await r.text());

  const context = await newContext(t, browser());
  const page = await context.newPage();
  await page.goto(`${room.base}/product/42`);
  assert.equal(await page.textContent('h1'), 'Air Max 1: the drop opens soon');
  const first = await page.textContent('#wr-countdown-left');
  assert.match(first, /^0:0\d$/);
  await eventually('the countdown to tick', async () => (await page.textContent('#wr-countdown-left')) !== first, {
    timeout: 3000,
  });
  assert.match(await page.textContent('main'), /random place at the start/);
  await screenshot(page, 'prequeue-desktop.png');

  // The start: the page reloads within a refresh interval (2 s here) and lands in the shop.
  await eventually(
    'the visitor to be let in after the start',
    async () => (await page.textContent('body')).includes('Shop page /product/42'),
    { timeout: startsIn + 8000, every: 200 },
  );
});
