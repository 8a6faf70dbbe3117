'use strict';
// (h) The waiting page is light (< 20 KB of HTML) and self-contained: the browser asks nothing of
//     any origin but the proxy's own, while it waits. The operator's console too: its sign-in
//     page and, signed in, its page with the script and style it is served with (inline: no
//     other script, style, font or image is fetched) under a budget (docs/console.md).

const zlib = require('node:zlib');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const {
  useBrowser,
  newContext,
  roomFor,
  takeTheOnlyPlace,
  shownNumber,
  sleep,
  eventually,
  textOf,
  ADMIN_TOKEN,
} = require('../lib/harness');

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

// Today: the sign-in page about 4.9 KB, the console about 44.7 KB (its script about 34 KB of
// it), served uncompressed by the admin listener.
const SIGN_IN_BUDGET = 8 * 1024;
const CONSOLE_BUDGET = 56 * 1024;
// What makes a page's weight; the rest the console asks for is its data (the API's JSON and the
// live view's event stream).
const PAGE_PARTS = new Set(['document', 'script', 'stylesheet', 'font', 'image', 'media']);

test('(h) the console weighs < 56 KB with its script and style, its sign-in page < 8 KB', async (t) => {
  const room = await roomFor(t);
  const context = await newContext(t, browser());
  const page = await context.newPage();
  let parts = [];
  const data = [];
  page.on('response', (r) => {
    const type = r.request().resourceType();
    // The sign-in's 303 to the console has no body; data: URLs (the tab's icon) are no request.
    if (r.url().startsWith('data:') || (r.status() >= 300 && r.status() < 400)) return;
    const where = `${new URL(r.url()).pathname}${new URL(r.url()).search}`;
    if (PAGE_PARTS.has(type)) {
      parts.push(r.body().then((body) => ({ type, url: r.url(), body })));
    } else if (type !== 'eventsource') {
      data.push(r.body().then((body) => `${where} ${body.length}`, () => `${where} (no body read)`));
    }
  });
  const weigh = async (label, budget) => {
    const loaded = await Promise.all(parts);
    parts = [];
    const bytes = loaded.reduce((sum, p) => sum + p.body.length, 0);
    const gzipped = loaded.reduce((sum, p) => sum + zlib.gzipSync(p.body).length, 0);
    t.diagnostic(`${label}: ${bytes} bytes (${loaded.map((p) => `${p.type} ${p.body.length}`).join(', ')}; ${gzipped} gzipped), budget ${budget}`);
    assert.deepEqual(loaded.map((p) => p.type), ['document'], `${label}: one document, its script and style inline`);
    assert.ok(bytes < budget, `${label}: ${bytes} bytes`);
    return loaded[0].body.toString('utf8');
  };

  const signInResp = await page.goto(`${room.adminBase}/admin/console`);
  // The bodies weighed are as decoded; today the admin listener sends them uncompressed.
  t.diagnostic(`console content-encoding: ${signInResp.headers()['content-encoding'] || 'none'}`);
  await page.getByLabel('Admin token').waitFor();
  await weigh('console sign-in page', SIGN_IN_BUDGET);

  await page.getByLabel('Admin token').fill(ADMIN_TOKEN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await eventually('the live view', async () => (await textOf(page, '#live')).startsWith('live'));
  const html = await weigh('console', CONSOLE_BUDGET);
  const inline = (tag) => Buffer.byteLength((html.match(new RegExp(`<${tag}[^>]*>([\\s\\S]*?)<\/${tag}>`)) || ["", ""])[1]);
  t.diagnostic(`console: inline script ${inline('script')} bytes, inline style ${inline('style')} bytes`);
  assert.doesNotMatch(html, /<script[^>]+src=|<link[^>]+rel="?stylesheet/, 'no script or stylesheet of its own file');
  t.diagnostic(`console's data at open: ${(await Promise.all(data)).join(', ')}`);
});
