'use strict';
// (m) Leaving the line from the page: the confirmation, the place freed for the one behind, the
//     page that offers to join again at the back. (n) "Tell me when it is my turn": with the
//     notification permission granted and refused, the tab in the background is told (title and
//     icon always, notification when allowed, a tone when the visitor ticked the sound box), keeps
//     saying it over its own Refresh, and goes in once the visitor comes back.

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
  sleep,
} = require('../lib/harness');

const browser = useBrowser();

test('(m) the leave button asks first, frees the place at once and offers to join again at the back', async (t) => {
  const room = await roomFor(t, { room: { refresh_interval: '30s' } });
  await takeTheOnlyPlace(room);
  const context = await newContext(t, browser());
  const page = await context.newPage();
  await page.goto(`${room.base}/product/42`);
  assert.equal(await shownNumber(page), '1');
  const behind = room.visitor();
  assert.equal(JSON.parse((await behind.getJson('/product/9')).body).waitroom.position, 2);
  const queueId = await textOf(page, '#wr-qid');
  assert.match(queueId, /^[0-9A-Z]{4}-[0-9A-Z]{4}-[0-9A-Z]{4}$/);

  // The confirmation comes first; nothing is left yet.
  const confirm = page.getByRole('button', { name: 'Yes, leave the line' });
  assert.equal(await confirm.isVisible(), false);
  await page.getByText('Leave the line', { exact: true }).click();
  assert.equal(await confirm.isVisible(), true);
  assert.match(await textOf(page, '#wr-leave-form p'), /next person/);
  assert.equal((await room.state()).queue_length, 2);

  await Promise.all([page.waitForURL(/__waitroom\/leave/), confirm.click()]);
  assert.equal(await textOf(page, 'h1'), 'You left the line');
  assert.equal((await room.state()).queue_length, 1, 'the place is free at once');
  assert.equal(JSON.parse((await behind.getJson('/product/9')).body).waitroom.position, 1);
  const cookie = (await context.cookies(room.base)).find((c) => c.name === 'waitroom');
  assert.equal(cookie, undefined, 'the ticket is gone from the browser');

  // Joining again is at the back, behind the one who moved up, under a new queue id.
  await page.getByRole('link', { name: 'Join the line again at the back' }).click();
  await eventually('the waiting page again', async () => (await shownNumber(page)) === '2');
  assert.notEqual(await textOf(page, '#wr-qid'), queueId);
});

/**
 * The tab's visibility as the test sets it (headless pages are always visible), kept over the
 * page's reloads, and every notification the page shows and every Web Audio call it makes
 * recorded (in sessionStorage, so that the page's reloads keep them).
 */
async function watchedContext(t, options) {
  const context = await newContext(t, browser(), options);
  await context.addInitScript(() => {
    const hidden = () => sessionStorage.getItem('test-hidden') === '1';
    Object.defineProperty(document, 'hidden', { configurable: true, get: hidden });
    Object.defineProperty(document, 'visibilityState', {
      configurable: true,
      get: () => (hidden() ? 'hidden' : 'visible'),
    });
    const Real = window.Notification;
    function Recorded(title, opts) {
      const shown = JSON.parse(sessionStorage.getItem('test-notes') || '[]');
      shown.push({ title, body: opts && opts.body });
      sessionStorage.setItem('test-notes', JSON.stringify(shown));
      return { close() {} };
    }
    Object.defineProperty(Recorded, 'permission', { get: () => Real.permission });
    Recorded.requestPermission = (...args) => Real.requestPermission(...args);
    window.Notification = Recorded;

    // Web Audio, stubbed: nothing sounds, each call is written down.
    const heard = (call) => {
      const calls = JSON.parse(sessionStorage.getItem('test-audio') || '[]');
      calls.push(call);
      sessionStorage.setItem('test-audio', JSON.stringify(calls));
    };
    class StubAudio {
      constructor() {
        heard('context');
        this.currentTime = 1;
        this.destination = { stub: 'destination' };
        this.state = 'suspended';
      }
      resume() {
        heard('resume');
        this.state = 'running';
        return Promise.resolve();
      }
      createOscillator() {
        heard('oscillator');
        const ctx = this;
        return {
          connect: (to) => heard(to === ctx.destination ? 'connect destination' : 'connect elsewhere'),
          start: () => heard('start'),
          stop: (when) => heard(when > ctx.currentTime && when <= ctx.currentTime + 2 ? 'stop soon' : `stop at ${when}`),
        };
      }
    }
    window.AudioContext = StubAudio;
    window.webkitAudioContext = StubAudio;
  });
  return context;
}

const notes = (page) => page.evaluate(() => JSON.parse(sessionStorage.getItem('test-notes') || '[]'));
const audioCalls = (page) => page.evaluate(() => JSON.parse(sessionStorage.getItem('test-audio') || '[]'));
const forgetAudio = (page) => page.evaluate(() => sessionStorage.removeItem('test-audio'));
const icon = (page) => page.evaluate(() => document.querySelector('link[rel="icon"]').getAttribute('href'));
const TONE = ['oscillator', 'connect destination', 'start', 'stop soon'];
const setHidden = (page, hidden) =>
  page.evaluate((h) => {
    sessionStorage.setItem('test-hidden', h ? '1' : '0');
    document.dispatchEvent(new Event('visibilitychange'));
  }, hidden);

async function calledInTheBackground(t, { permissions, withSound, expectState, expectNotes }) {
  // Refresh every 3 s: the told tab must stop it, or the shop's page would replace the title.
  const room = await roomFor(t, { room: { refresh_interval: '3s' } });
  const holder = await takeTheOnlyPlace(room);
  const context = await watchedContext(t, { permissions });
  const page = await context.newPage();
  await page.goto(`${room.base}/product/42`);
  assert.equal(await shownNumber(page), '1');
  const plainIcon = await icon(page);
  assert.equal(plainIcon, 'data:,', 'the page starts with its empty icon');

  if (withSound) await page.getByLabel('Play a sound too').check();
  await page.getByRole('button', { name: 'Tell me when it’s my turn' }).click();
  await eventually('the opt-in to be confirmed', async () => (await textOf(page, '#wr-notify-state')) === expectState);
  assert.equal(await page.getAttribute('#wr-notify', 'aria-pressed'), 'true');
  // Remembered over the page's reloads (its Refresh comes every 3 s).
  await sleep(3500);
  await eventually('the opt-in after a reload', async () => (await page.getAttribute('#wr-notify', 'aria-pressed')) === 'true');
  assert.equal(await page.isChecked('#wr-sound'), withSound, 'the sound box as the visitor left it');
  // Opting in opens the audio (on the click, as browsers want) but sounds nothing yet; without
  // the box ticked, no audio at all.
  const openedOnOptIn = await audioCalls(page);
  if (withSound) assert.ok(openedOnOptIn.includes('context') && openedOnOptIn.includes('resume'), String(openedOnOptIn));
  assert.deepEqual(openedOnOptIn.filter((c) => TONE.includes(c)), [], 'no tone before the turn');
  if (!withSound) assert.deepEqual(openedOnOptIn, [], 'no audio without the sound box');
  assert.equal(await icon(page), plainIcon, 'the icon unchanged before the turn');
  await forgetAudio(page);

  await setHidden(page, true);
  await holder.leave();
  await eventually('the tab to say it is the turn', async () => /^It’s your turn! · /.test(await page.title()), {
    timeout: 15000,
  });
  assert.deepEqual(await notes(page), expectNotes);
  // The icon turns to the drawn one, whether notifications are allowed or not.
  const turnIcon = await icon(page);
  assert.notEqual(turnIcon, plainIcon, 'the tab icon changes on the turn');
  assert.match(turnIcon, /^data:image\/png;base64,/);
  // The tone, once, when the box was ticked; nothing otherwise.
  const onTurn = await audioCalls(page);
  assert.deepEqual(onTurn.filter((c) => c !== 'context' && c !== 'resume'), withSound ? TONE : [], String(onTurn));
  assert.equal(await textOf(page, 'h1'), "You're in line", 'still the waiting page, not the shop');
  // The admission is claimed already (the pass is set), and the page's Refresh is stopped.
  const pass = (await context.cookies(room.base)).find((c) => c.name === 'waitroom');
  assert.ok(pass && pass.value);
  assert.equal((await room.state()).queue_length, 0);
  await sleep(4000);
  assert.match(await page.title(), /^It’s your turn! · /, 'no reload took the title away');
  assert.equal(await icon(page), turnIcon, 'nor the icon');
  assert.equal((await audioCalls(page)).filter((c) => c === 'start').length, withSound ? 1 : 0, 'one tone only');

  await setHidden(page, false);
  await eventually('the shop, once the visitor is back', async () => (await page.title()) === 'Shop page /product/42');
}

test('(n) notifications allowed, sound ticked: the hidden tab is told by a notification, its title, its icon and a tone', async (t) => {
  await calledInTheBackground(t, {
    permissions: ['notifications'],
    withSound: true,
    expectState: 'We will let you know when it’s your turn, even while you are in another tab.',
    expectNotes: [{ title: 'It’s your turn!', body: 'Come back to this tab to go in.' }],
  });
});

test('(n) notifications allowed, sound not ticked: told without a tone', async (t) => {
  await calledInTheBackground(t, {
    permissions: ['notifications'],
    withSound: false,
    expectState: 'We will let you know when it’s your turn, even while you are in another tab.',
    expectNotes: [{ title: 'It’s your turn!', body: 'Come back to this tab to go in.' }],
  });
});

test('(n) notifications refused: the title and the icon alone say it', async (t) => {
  await calledInTheBackground(t, {
    permissions: [],
    withSound: false,
    expectState:
      'This browser does not allow notifications: the tab’s title will change when it’s your turn.',
    expectNotes: [],
  });
});
