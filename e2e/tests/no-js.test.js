'use strict';
// (b) With JavaScript off the waiting page still shows the place, and the HTTP Refresh header
//     alone brings the visitor in once a place frees.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const {
  useBrowser,
  newContext,
  roomFor,
  takeTheOnlyPlace,
  shownNumber,
  textOf,
  eventually,
} = require('../lib/harness');

const browser = useBrowser();

test('(b) without JavaScript the Refresh header keeps the place and lets the visitor in', async (t) => {
  const room = await roomFor(t, { room: { refresh_interval: '1s' } });
  const holder = await takeTheOnlyPlace(room);

  const context = await newContext(t, browser(), { javaScriptEnabled: false });
  const page = await context.newPage();
  const documents = [];
  page.on('request', (r) => {
    if (r.isNavigationRequest()) documents.push(r.url());
  });
  const resp = await page.goto(`${room.base}/product/42`);
  assert.equal(resp.status(), 200);
  assert.equal(resp.headers()['refresh'], '1');
  assert.equal(await shownNumber(page), '1');
  assert.match(await textOf(page, '#wr-place'), /^You are number 1 in line$/);
  assert.match(await textOf(page, '#wr-time'), /^\d\d:\d\d:\d\d UTC$/);

  // The browser refreshes by itself (no script runs) and keeps its place.
  await eventually('two refreshes by the Refresh header', () => documents.length >= 3, {
    timeout: 6000,
  });
  assert.equal(await shownNumber(page), '1');
  assert.equal((await room.state()).queue_length, 1);
  assert.ok(documents.every((u) => u === `${room.base}/product/42`), documents.join(' '));

  await holder.get('/checkout');
  await page.getByRole('heading', { name: 'Shop page /product/42' }).waitFor({ timeout: 8000 });
  assert.equal(page.url(), `${room.base}/product/42`);
  const state = await room.state();
  assert.equal(state.occupancy, 1);
  assert.equal(state.queue_length, 0);
});
