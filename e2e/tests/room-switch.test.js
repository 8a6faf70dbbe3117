'use strict';
// A visitor already waiting, with JavaScript on, when the operator switches the room live
// (PUT /admin/config). New visitors feel the switch at once; the waiting page should too, within
// a few seconds (its events stream is checked every second), not only at the next Refresh.
//
// Fixed: the events stream ends with a reload answer when the room is switched (suspended,
// passthrough, reject), and the page reloads on a closed or passthrough room.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const {
  useBrowser,
  newContext,
  roomFor,
  takeTheOnlyPlace,
  shownNumber,
  sleep,
} = require('../lib/harness');

const browser = useBrowser();
const PROMPTLY_MS = 6000;

async function waitingVisitor(t) {
  const room = await roomFor(t, { room: { refresh_interval: '30s' } });
  await takeTheOnlyPlace(room);
  const context = await newContext(t, browser());
  const page = await context.newPage();
  await page.goto(`${room.base}/product/42`);
  assert.equal(await shownNumber(page), '1');
  await sleep(1200); // the events stream is up and has pushed once
  return { room, page };
}

test('(switch) passthrough lets an already waiting visitor in promptly', async (t) => {
  const { room, page } = await waitingVisitor(t);
  await room.putConfig({ queueing_method: 'passthrough' });
  const fresh = await room.visitor().get('/product/9');
  assert.match(fresh.body, /Shop page \/product\/9/, 'a new visitor passes at once');
  await page
    .getByRole('heading', { name: 'Shop page /product/42' })
    .waitFor({ timeout: PROMPTLY_MS })
    .catch(async () => {
      assert.fail(`still waiting ${PROMPTLY_MS} ms after passthrough: "${await page.textContent('#wr-place')}"`);
    });
});

test('(switch) suspending the room lets an already waiting visitor in promptly', async (t) => {
  const { room, page } = await waitingVisitor(t);
  await room.putConfig({ suspended: true });
  const fresh = await room.visitor().get('/product/9');
  assert.match(fresh.body, /Shop page \/product\/9/, 'a new visitor passes at once');
  await page
    .getByRole('heading', { name: 'Shop page /product/42' })
    .waitFor({ timeout: PROMPTLY_MS })
    .catch(async () => {
      assert.fail(`still waiting ${PROMPTLY_MS} ms after suspending: "${await page.textContent('#wr-place')}"`);
    });
});

test('(switch) reject takes a waiting visitor to the closed page promptly', async (t) => {
  const { room, page } = await waitingVisitor(t);
  await room.putConfig({ queueing_method: 'reject' });
  const fresh = await room.visitor().get('/product/9');
  assert.match(fresh.body, /This drop is closed/, 'a new visitor gets the closed page at once');
  await page
    .getByRole('heading', { name: 'This drop is closed' })
    .waitFor({ timeout: PROMPTLY_MS })
    .catch(() => assert.fail(`no closed page ${PROMPTLY_MS} ms after reject`));
  assert.equal(await page.$('#wr-place .num'), null, 'no place in line is shown any more');
});
