'use strict';
// (h) The waiting page is light (< 20 KB of HTML) and self-contained: the browser asks nothing of
//     any origin but the proxy's own, while it waits.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { useBrowser, newContext, roomFor, takeTheOnlyPlace, shownNumber, sleep } = require('../lib/harness');

const browser = useBrowser();

test('(h) the waiting page weighs < 20 KB and only talks to its own origin', async (t) => {
  const room = await roomFor(t);
  await takeTheOnlyPlace(room);
  const context = await newContext(t, browser());
  const page = await context.newPage();
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  const resp = await page.goto(`${room.base}/product/42`);
  const html = await resp.body(); // at once: the Refresh header reloads the page after 2 s
  assert.equal(await shownNumber(page), '1');
  t.diagnostic(`waiting page: ${html.length} bytes of HTML`);
  assert.ok(html.length < 20 * 1024, `${html.length} bytes`);

  // Two refresh intervals and more: the page's polling, events and the Refresh reload.
  await sleep(4500);
  const origin = new URL(room.base).origin;
  const foreign = requests.filter((u) => !u.startsWith('data:') && new URL(u).origin !== origin);
  assert.deepEqual(foreign, [], 'requests to other origins');
  const paths = requests.map((u) => new URL(u).pathname);
  t.diagnostic(`requests: ${paths.join(' ')}`);
  assert.ok(paths.includes('/__waitroom/events') || paths.includes('/__waitroom/status'), paths.join(' '));
  // Nothing but the document and the reserved status endpoints.
  for (const p of paths) {
    assert.ok(p === '/product/42' || p.startsWith('/__waitroom/'), `unexpected request for ${p}`);
  }
});
