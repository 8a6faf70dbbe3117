'use strict';
// (o) The drop report's HTML file (GET /admin/report?format=html), as the shop's owner gets it:
//     a small drop (a crowd larger than the room, a checkout, an event governing) written to a
//     file and opened from disk in Chromium, light and dark, on a desktop and a phone: axe-core
//     finds no serious or critical violation (the console test's rule; every violation is
//     printed), the dark scheme is applied, no sideways scrolling on a phone, and the page asks
//     for nothing (no request but the file). Its weight, the whole report's and one event's,
//     under a budget (docs/console.md, "Made like the waiting page").

const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const { useBrowser, newContext, defer, roomFor, eventually, ADMIN_TOKEN, VIEWPORTS, seriousViolations } = require('../lib/harness');

const browser = useBrowser();
const AUTH = { authorization: `Bearer ${ADMIN_TOKEN}` };
// Today (a small drop: a minute or two, two sections, the event spanning all of it) the whole
// report and the event's are each about 5.1 KB; the file grows with the minutes it charts.
const REPORT_BUDGET = 8 * 1024;


async function admin(room, method, pathname, body) {
  const r = await fetch(room.adminBase + pathname, {
    method,
    headers: { ...AUTH, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body && JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${method} ${pathname}: ${r.status} ${await r.text()}`);
  return r;
}

test('(o) the drop report as an HTML file: axe light and dark, on a phone, self-contained, small', async (t) => {
  const room = await roomFor(t, { room: { total_active_users: 2 } });
  // An event governing now, opened ten minutes ago: the report has its own section for it.
  const minute = 60000;
  await admin(room, 'POST', '/admin/events', {
    name: 'spring-drop',
    event_start_time: new Date(Date.now() - 10 * minute).toISOString(),
    event_end_time: new Date(Date.now() + 50 * minute).toISOString(),
  });
  const report = async () => (await (await admin(room, 'GET', '/admin/report')).json()).rooms[0];
  // The history starts at the loop's first reading: the crowd comes after it.
  await eventually('a first minute recorded', async () => (await report()).minutes >= 1, { timeout: 15000, every: 200 });

  // Two go in, two wait; a checkout frees a place and the first in line goes in.
  const crowd = [];
  for (let i = 0; i < 4; i++) {
    const visitor = room.visitor();
    assert.equal((await visitor.get(`/product/${i}`)).body.includes('Shop page'), i < 2, `visitor ${i}`);
    crowd.push(visitor);
  }
  await crowd[0].get('/checkout');
  await eventually('the first in line called', async () => (await crowd[2].get('/product/2')).body.includes('Shop page'), {
    every: 200,
  });
  const counted = await eventually('the report of this drop', async () => {
    const r = await report();
    return r.admitted === 3 && r.joined === 2 && r.revoked.ended === 1 && r.events.length === 1 && r;
  }, { every: 250 });
  t.diagnostic(`the drop: ${counted.minutes} minute(s), admitted ${counted.admitted}, joined ${counted.joined}`);

  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'waitroom-e2e-report-'));
  defer(t, () => fs.rmSync(dir, { recursive: true, force: true }));
  const files = {};
  for (const [name, query] of [['whole', ''], ['event', '&event=spring-drop']]) {
    const r = await admin(room, 'GET', `/admin/report?format=html${query}`);
    assert.match(r.headers.get('content-disposition'), /^attachment; filename="waitroom-report-.*\.html"$/);
    const html = Buffer.from(await r.arrayBuffer());
    t.diagnostic(`report HTML (${name}): ${html.length} bytes (budget ${REPORT_BUDGET})`);
    assert.ok(html.length < REPORT_BUDGET, `the ${name} report: ${html.length} bytes`);
    files[name] = path.join(dir, `report-${name}.html`);
    fs.writeFileSync(files[name], html);
  }
  assert.match(fs.readFileSync(files.whole, 'utf8'), /spring-drop/, 'the event has its section');

  for (const [viewport, options] of Object.entries(VIEWPORTS)) {
    const context = await newContext(t, browser(), options);
    const page = await context.newPage();
    for (const file of Object.values(files)) {
      const url = `file://${file}`;
      const requests = [];
      page.on('request', (r) => requests.push(r.url()));
      for (const colorScheme of ['light', 'dark']) {
        await page.emulateMedia({ colorScheme });
        await page.goto(url);
        const label = `report ${path.basename(file)} ${viewport} ${colorScheme}`;
        assert.equal(await page.locator('svg[role="img"]').count() > 0, true, `${label}: a chart`);
        const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
        assert.equal(background, colorScheme === 'dark' ? 'rgb(11, 17, 32)' : 'rgb(248, 250, 252)', `${label}: its scheme`);
        const width = await page.evaluate(() => document.documentElement.scrollWidth);
        assert.ok(width <= options.viewport.width, `${label}: no sideways scrolling (${width} px)`);
        assert.deepEqual(await seriousViolations(t, page, label), [], label);
      }
      page.removeAllListeners('request');
      assert.deepEqual(requests.filter((u) => u !== url), [], 'the file asks for nothing');
    }
  }
});
