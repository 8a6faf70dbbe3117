'use strict';
// (k) The operator's console in a real browser: only the sign-in form before signing in, a wrong
//     token refused, the live view following a small crowd larger than the room (the line moving
//     up when a place is freed at the checkout, inside rising with a raised limit), the drop
//     report's figures of that crowd and its HTML download (the room named, nothing pointing
//     elsewhere), the room's last hour charted in the live view (its text alternative naming the
//     figures) with the passes revoked and the challenges, queue_all and a lowered limit each
//     confirmed in the dialog and taking effect, an event added from the form, edited (later: at
//     once; moved to govern now, and governing: confirmed, with the change listed, and charted
//     since it opened) and called off, the audit log naming the session, sign-out; axe-core finds
//     no serious or critical violation (light desktop, dark phone). The pages are saved as
//     docs/console.md's screenshots.

const fs = require('node:fs');
const { test } = require('node:test');
const assert = require('node:assert/strict');
const {
  useBrowser,
  newContext,
  roomFor,
  screenshot,
  eventually,
  textOf,
  ADMIN_TOKEN,
  VIEWPORTS,
  seriousViolations,
} = require('../lib/harness');

const browser = useBrowser();


async function signIn(page, adminBase, token) {
  await page.goto(`${adminBase}/admin/console`);
  await page.getByLabel('Admin token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForLoadState('domcontentloaded');
}

/** The figures (dt: dd) of the first part of the drop report: the room's. */
async function roomReport(page) {
  const rows = page.locator('#report > div').first().locator('dl.figures > div');
  const figures = {};
  for (const row of await rows.all()) {
    figures[(await row.locator('dt').textContent()).trim()] = (await row.locator('dd').textContent()).trim();
  }
  return figures;
}

/** `minutes` from now as a datetime-local value, in the browser's own time zone. */
function localInput(page, minutes) {
  return page.evaluate((m) => {
    const d = new Date(Date.now() + m * 60000);
    const two = (n) => String(n).padStart(2, '0');
    return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())}T${two(d.getHours())}:${two(d.getMinutes())}`;
  }, minutes);
}

test('(k) console: sign in, watch the room, change it with a confirmation, sign out', async (t) => {
  const room = await roomFor(t, { room: { total_active_users: 2 } });
  // The console's CSP runs its own script only: axe-core is let in by Playwright's bypass.
  const context = await newContext(t, browser(), { ...VIEWPORTS.desktop, bypassCSP: true, acceptDownloads: true });
  const page = await context.newPage();
  const outside = [];
  page.on('request', (r) => {
    if (!r.url().startsWith(room.adminBase)) outside.push(r.url());
  });

  await page.goto(`${room.adminBase}/admin/console`);
  assert.equal(await page.locator('#rooms').count(), 0, 'nothing of the rooms before signing in');
  assert.deepEqual(await seriousViolations(t, page, 'sign-in'), []);
  await signIn(page, room.adminBase, 'not-the-token');
  assert.equal(await textOf(page, '.problem'), 'That is not the admin token.');

  await signIn(page, room.adminBase, ADMIN_TOKEN);
  await eventually('the live view', async () => (await textOf(page, '#live')).startsWith('live'));
  const card = page.locator('section.room').first();
  const figure = (name) => card.locator(`[data-field="${name}"]`).textContent();
  const dialog = page.locator('#confirm');

  // A small crowd, larger than the room: two go in, two wait in line.
  const crowd = [];
  for (let i = 0; i < 4; i++) {
    const visitor = room.visitor();
    const first = await visitor.get(`/product/${i}`);
    assert.equal(first.body.includes('Shop page'), i < 2, `visitor ${i}`);
    crowd.push(visitor);
  }
  await eventually('the crowd on the live view', async () =>
    (await figure('inside')) === '2 / 2' && (await figure('waiting')) === '2');
  // A place freed at the checkout: the first in line is called in, the line shortens.
  await crowd[0].get('/checkout');
  await eventually('the line moving up', async () => (await figure('waiting')) === '1');
  assert.match((await crowd[2].get('/product/2')).body, /Shop page/, 'the first in line goes in');
  await eventually('the admission counted', async () => (await figure('admitted')) === '3');
  // A raised limit asks nothing and lets the last in line in: inside rises, nobody waits.
  await card.getByLabel('Total active users', { exact: true }).fill('5');
  await card.getByRole('button', { name: 'Apply limits' }).click();
  await eventually('the limit raised', async () => (await room.state()).total_active_users === 5);
  assert.equal(await dialog.isVisible(), false, 'raising a limit asks nothing');
  await eventually('the last in line called', async () =>
    (await figure('inside')) === '3 / 5' && (await figure('waiting')) === '0');
  assert.match((await crowd[3].get('/product/3')).body, /Shop page/);

  // The drop report: four admitted (two at once, two from the line), two joined the line.
  const reportSection = page.locator('section', { has: page.getByRole('heading', { name: 'Drop report' }) });
  await reportSection.scrollIntoViewIfNeeded();
  await eventually('the report of this crowd', async () => {
    await reportSection.getByRole('button', { name: 'Refresh the report' }).click();
    const figures = await roomReport(page);
    return figures.Admitted === '4' && figures['Joined the line'] === '2';
  }, { every: 500 });
  assert.match(await textOf(page, '#report h3'), /^E2E drop \(e2e-room\), \d+ minutes?$/);
  // The live view's history, from the same report: the last hour drawn, its text alternative
  // naming the figures (the four admitted, all within the hour), and the passes revoked (the
  // checkout ended one) and challenges (none asked).
  const lastHour = card.locator('[data-field="last-hour-chart"] svg[role="img"]');
  const lastHourText = await eventually('the last hour drawn', async () => {
    const text = await lastHour.getAttribute('aria-label', { timeout: 500 });
    return text.includes('admitted 4 in all') && text;
  });
  assert.match(lastHourText, /^The last hour, per minute from .+ to .+ \(\d+ minutes? recorded\): inside \d+ at the last minute, \d+ at most; waiting \d+ at the last minute, \d+ at most; admitted 4 in all, \d+ at most in a minute\.$/);
  assert.equal(await lastHour.locator('title').textContent(), await lastHour.getAttribute('aria-label'));
  assert.match(await card.locator('[data-part="last-hour"] .key').textContent(), /^0 to \d+, .+ to .+, a minute each:/);
  assert.equal(await figure('revoked'), '1 / 0', 'passes revoked: ended / shared');
  assert.equal(await figure('challenges'), '0 / 0', 'challenges: passed / failed');
  assert.match(await figure('counted'), /^Passes revoked and challenges: since .+ \(the history the proxy keeps, a day at most\)/);
  assert.equal(await card.locator('[data-part="since-event"]').isVisible(), false, 'no event governs: no chart of one');
  const [download] = await Promise.all([
    page.waitForEvent('download'),
    reportSection.getByRole('link', { name: /Download the report/ }).click(),
  ]);
  assert.match(download.suggestedFilename(), /^waitroom-report-.*\.html$/);
  const report = fs.readFileSync(await download.path(), 'utf8');
  assert.match(report, /e2e-room/, 'the room is named in the file');
  assert.doesNotMatch(report, /https?:|\/\/[a-z0-9]/i, 'nothing in the file points elsewhere');

  // queue_all: the dialog says what happens, and only "Do it" applies it.
  await card.getByLabel(/Queue everyone new/).click();
  assert.match(await textOf(page, '#confirm-text'), /nobody new is let in/);
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  assert.equal((await room.state()).queue_all, false, 'cancelled: nothing changed');
  assert.equal(await card.getByLabel(/Queue everyone new/).isChecked(), false);
  await card.getByLabel(/Queue everyone new/).click();
  await dialog.getByRole('button', { name: 'Do it' }).click();
  await eventually('queue_all applied', async () => (await room.state()).queue_all === true);
  const newcomer = await room.visitor().get('/product/9');
  assert.ok(!newcomer.body.includes('Shop page'), 'a newcomer queues, with places free');

  // A lowered limit asks first, naming the old and new capacity.
  await card.getByLabel('Total active users', { exact: true }).fill('2');
  await card.getByRole('button', { name: 'Apply limits' }).click();
  assert.match(await textOf(page, '#confirm-text'), /capacity from 5 to 2/);
  await dialog.getByRole('button', { name: 'Do it' }).click();
  await eventually('the limit applied', async () => (await room.state()).total_active_users === 2);
  await eventually('the live view follows', async () =>
    (await figure('inside')) === '3 / 2' && (await figure('waiting')) === '1');

  // An event added from the form (its times in the browser's zone, sent as UTC).
  const form = card.locator('form[data-form="add-event"]');
  await card.getByText('Add an event').click();
  await form.getByLabel('Name').fill('console-drop');
  await form.getByLabel('Starts (your time)').fill('2030-06-01T10:00');
  await form.getByLabel('Ends (your time)').fill('2030-06-01T12:00');
  await form.getByRole('button', { name: 'Add event' }).click();
  assert.match(await textOf(page, '#confirm-text'), /Event console-drop governs the room from/);
  await dialog.getByRole('button', { name: 'Do it' }).click();
  const events = async () => (await (await fetch(`${room.adminBase}/admin/events`, {
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
  })).json()).events;
  const drop = async () => (await events()).find((e) => e.name === 'console-drop');
  await eventually('the event added', drop);
  const startsAt = await page.evaluate(() => new Date('2030-06-01T10:00').getTime());
  assert.equal(Date.parse((await drop()).event_start_time), startsAt, 'the start as the operator meant it');
  const item = card.locator('[data-field="events"] li', { hasText: 'console-drop' });
  const opensAt = await page.evaluate(() => new Date('2030-06-01T10:00').toLocaleString());
  await eventually('the live view names the next event', async () =>
    (await figure('next-event')) === `console-drop, ${opensAt}`);

  // Edited: the form comes back filled; a later event changes without a dialog, only the keys
  // changed are sent, and the list shows the new end and limits.
  await item.getByRole('button', { name: 'Edit' }).click();
  assert.equal(await form.getByLabel('Ends (your time)').inputValue(), '2030-06-01T12:00');
  assert.equal(await form.getByLabel('Name').inputValue(), 'console-drop');
  await form.getByLabel('Ends (your time)').fill('2030-06-01T13:00');
  await form.getByLabel('Total active users during it').fill('50');
  await form.getByLabel('New users per minute during it').fill('100');
  await form.getByRole('button', { name: 'Save changes' }).click();
  const endsAt = await page.evaluate(() => new Date('2030-06-01T13:00').toISOString());
  await eventually('the event edited', async () => {
    const e = await drop();
    return e.event_end_time === endsAt && e.total_active_users === 50 && e.new_users_per_minute === 100;
  });
  assert.equal(await dialog.isVisible(), false, 'a later event is edited without asking');
  assert.equal(Date.parse((await drop()).event_start_time), startsAt, 'the start untouched');
  await eventually('the list shows the edit', async () => {
    const text = await item.textContent();
    return text.includes(`to ${endsAt}`) && text.includes('50 inside at most, 100 new a minute');
  });
  await card.getByText('Add an event').waitFor();

  // Moved to govern now: the dialog says so and lists the change; then, governing, its limit
  // lowered again asks first and applies at once.
  await item.getByRole('button', { name: 'Edit' }).click();
  await form.getByLabel('Starts (your time)').fill(await localInput(page, -60));
  await form.getByRole('button', { name: 'Save changes' }).click();
  assert.match(await textOf(page, '#confirm-text'), /^Event console-drop governs the room from now on\. starts: .+ → .+\.$/);
  await dialog.getByRole('button', { name: 'Do it' }).click();
  await eventually('the event governing', async () => (await room.state()).event === 'console-drop');
  await eventually('the live view shows its capacity', async () => (await figure('inside')) === '3 / 50');
  await eventually('the list says it governs', async () => (await item.textContent()).includes('governing now'));
  // Governing: a second chart, since it opened (the report fetched again for it).
  const sinceEvent = card.locator('[data-part="since-event"]');
  await eventually('the chart since the event opened', async () =>
    (await sinceEvent.isVisible()) &&
    /^Since event console-drop opened \(.+\)$/.test(await sinceEvent.locator('h3').textContent()) &&
    /^Since event console-drop opened \(.+\), per minute from .+ admitted \d+ in all/.test(
      await sinceEvent.locator('svg[role="img"]').getAttribute('aria-label', { timeout: 500 })));
  assert.equal(await figure('next-event'), 'none', 'the one governing is not the next');
  await item.getByRole('button', { name: 'Edit' }).click();
  await form.getByLabel('Total active users during it').fill('40');
  await form.getByRole('button', { name: 'Save changes' }).click();
  assert.match(await textOf(page, '#confirm-text'),
    /^Event console-drop governs the room now: this applies at once\. total active users: 50 → 40\.$/);
  await dialog.getByRole('button', { name: 'Do it' }).click();
  await eventually('the event limit applied', async () => (await room.state()).total_active_users === 40);

  // Called off: the room's own settings again.
  await item.getByRole('button', { name: 'Call off' }).click();
  assert.match(await textOf(page, '#confirm-text'), /called off: .* from now on/);
  await dialog.getByRole('button', { name: 'Do it' }).click();
  await eventually('the event called off', async () => (await drop()).suspended === true);
  await item.getByRole('button', { name: 'Reinstate' }).waitFor();
  await eventually('the room its own again', async () => (await figure('inside')) === '3 / 2');
  await eventually('no event chart once none governs', async () => !(await sinceEvent.isVisible()));

  const who = (await textOf(page, '#who')).trim();
  await eventually('the audit log', async () => {
    const rows = await page.locator('#audit tr').allTextContents();
    const by = (what, changed) => rows.some((r) => r.includes(who) && r.includes(what) && r.includes(changed));
    return by('PATCH /admin/rooms/e2e-room/config', 'total_active_users') &&
      by('PATCH /admin/rooms/e2e-room/events/console-drop', '"total_active_users":40');
  });
  assert.deepEqual(await seriousViolations(t, page, 'console desktop'), []);
  // The top of the page: the room's live figures and its first controls.
  await page.evaluate(() => {
    document.activeElement.blur();
    window.scrollTo(0, 0);
  });
  await screenshot(page, 'console-desktop.png');

  const phone = await newContext(t, browser(), { ...VIEWPORTS.phone, colorScheme: 'dark', bypassCSP: true });
  const phonePage = await phone.newPage();
  await signIn(phonePage, room.adminBase, ADMIN_TOKEN);
  await eventually('the phone live view', async () => (await textOf(phonePage, '#live')).startsWith('live'));
  const width = await phonePage.evaluate(() => document.documentElement.scrollWidth);
  assert.ok(width <= 390, `no sideways scrolling on a phone (${width} px)`);
  assert.deepEqual(await seriousViolations(t, phonePage, 'console phone dark'), []);
  await screenshot(phonePage, 'console-phone-dark.png');

  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByLabel('Admin token').waitFor();
  assert.deepEqual(outside, [], 'no request leaves the admin listener');
});
