'use strict';
// (d) A visitor whose session the shop revoked (checkout) has no pass any more: when the room is
//     full again, the next visit queues.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const {
  useBrowser,
  newContext,
  roomFor,
  shownNumber,
  eventually,
} = require('../lib/harness');

const browser = useBrowser();

test('(d) a revoked visitor queues again when the room is full', async (t) => {
  const room = await roomFor(t);
  const context = await newContext(t, browser());
  const page = await context.newPage();

  // The room is empty: admitted in this very request, straight to the shop.
  const first = await page.goto(`${room.base}/product/1`);
  assert.equal(first.status(), 200);
  assert.equal(await page.title(), 'Shop page /product/1');
  const pass = (await context.cookies(room.base)).find((c) => c.name === 'waitroom');
  assert.ok(pass && pass.value, 'no pass cookie after admission');
  assert.equal((await room.state()).occupancy, 1);

  // The order is placed: the shop answers with the revoke command.
  const checkout = await page.goto(`${room.base}/checkout`);
  assert.equal(await page.title(), 'Shop page /checkout');
  assert.equal(checkout.headers()['cf-waiting-room-command'], undefined, 'the command leaked');
  const after = (await context.cookies(room.base)).find((c) => c.name === 'waitroom');
  assert.equal(after, undefined, 'the revoked pass cookie is still in the browser');
  await eventually('the place to be free', async () => (await room.state()).occupancy === 0);

  // Someone else takes the only place...
  const other = room.visitor();
  const r = await other.get('/product/2');
  assert.match(r.body, /Shop page \/product\/2/);

  // ...and the revoked visitor's next visit is the waiting page.
  const again = await page.goto(`${room.base}/product/1`);
  assert.equal(again.status(), 200);
  assert.equal(again.headers()['refresh'], '2');
  assert.equal(await shownNumber(page), '1');
  assert.notEqual(await page.title(), 'Shop page /product/1');
  const state = await room.state();
  assert.equal(state.occupancy, 1);
  assert.equal(state.queue_length, 1);
});
