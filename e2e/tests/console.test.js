'use strict';
// (k) The operator's console in a real browser: only the sign-in form before signing in, a wrong
//     token refused, the live view following a small crowd, queue_all and a lowered limit each
//     confirmed in the dialog and taking effect, an event added from the form and called off,
//     the audit log naming the session, sign-out;
//     axe-core finds no serious or critical violation (light desktop, dark phone). The pages are
//     saved as docs/console.md's screenshots.

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
} = require('../lib/harness');

const browser = useBrowser();
const AXE = require.resolve('axe-core/axe.min.js');

async function seriousViolations(t, page, label) {
  await page.addScriptTag({ path: AXE });
  const violations = await page.evaluate(async () => {
    // eslint-disable-next-line no-undef
    const result = await axe.run(document, { resultTypes: ['violations'] });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.length }));
  });
  for (const v of violations) t.diagnostic(`${label}: ${v.impact} ${v.id} (${v.help}) on ${v.nodes} node(s)`);
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

async function signIn(page, adminBase, token) {
  await page.goto(`${adminBase}/admin/console`);
  await page.getByLabel('Admin token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForLoadState('domcontentloaded');
}

test('(k) console: sign in, watch the room, change it with a confirmation, sign out', async (t) => {
  const room = await roomFor(t, { room: { total_active_users: 5 } });
  // The console's CSP runs its own script only: axe-core is let in by Playwright's bypass.
  const context = await newContext(t, browser(), { ...VIEWPORTS.desktop, bypassCSP: true });
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
  const inside = card.locator('[data-field="inside"]');
  for (let i = 0; i < 3; i++) await room.visitor().get(`/product/${i}`);
  await eventually('the crowd on the live view', async () => (await inside.textContent()) === '3 / 5');

  // queue_all: the dialog says what happens, and only "Do it" applies it.
  await card.getByLabel(/Queue everyone new/).click();
  const dialog = page.locator('#confirm');
  assert.match(await textOf(page, '#confirm-text'), /nobody new is let in/);
  await dialog.getByRole('button', { name: 'Cancel' }).click();
  assert.equal((await room.state()).queue_all, false, 'cancelled: nothing changed');
  assert.equal(await card.getByLabel(/Queue everyone new/).isChecked(), false);
  await card.getByLabel(/Queue everyone new/).click();
  await dialog.getByRole('button', { name: 'Do it' }).click();
  await eventually('queue_all applied', async () => (await room.state()).queue_all === true);
  const newcomer = await room.visitor().get('/product/9');
  assert.ok(!newcomer.body.includes('Shop page'), 'a newcomer queues');

  // A lowered limit asks first, naming the old and new capacity.
  await card.getByLabel('Total active users', { exact: true }).fill('2');
  await card.getByRole('button', { name: 'Apply limits' }).click();
  assert.match(await textOf(page, '#confirm-text'), /capacity from 5 to 2/);
  await dialog.getByRole('button', { name: 'Do it' }).click();
  await eventually('the limit applied', async () => (await room.state()).total_active_users === 2);
  await eventually('the live view follows', async () => (await inside.textContent()) === '3 / 2');

  // An event added from the form (its times in the browser's zone, sent as UTC), then called off.
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
  await eventually('the event added', async () => (await events()).some((e) => e.name === 'console-drop'));
  const added = (await events()).find((e) => e.name === 'console-drop');
  const startsAt = await page.evaluate(() => new Date('2030-06-01T10:00').getTime());
  assert.equal(Date.parse(added.event_start_time), startsAt, 'the start as the operator meant it');
  const item = card.locator('[data-field="events"] li', { hasText: 'console-drop' });
  await item.getByRole('button', { name: 'Call off' }).click();
  assert.match(await textOf(page, '#confirm-text'), /called off/);
  await dialog.getByRole('button', { name: 'Do it' }).click();
  await eventually('the event called off', async () =>
    (await events()).find((e) => e.name === 'console-drop').suspended === true);
  await item.getByRole('button', { name: 'Reinstate' }).waitFor();

  const who = (await textOf(page, '#who')).trim();
  await eventually('the audit log', async () => {
    const rows = await page.locator('#audit tr').allTextContents();
    return rows.some((r) => r.includes(who) && r.includes('PATCH /admin/rooms/e2e-room/config') && r.includes('total_active_users'));
  });
  assert.deepEqual(await seriousViolations(t, page, 'console desktop'), []);
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
