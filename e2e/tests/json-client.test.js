'use strict';
// (f) A Cloudflare JSON-mode client, run inside the waiting page: it asks the page's own URL
//     with exactly `Accept: application/json` and reads `cfWaitingRoom`, as it would on Cloudflare.

const { test } = require('node:test');
const assert = require('node:assert/strict');
const { useBrowser, newContext, roomFor, takeTheOnlyPlace, shownNumber } = require('../lib/harness');

const browser = useBrowser();

// Cloudflare's cfWaitingRoom keys, in Cloudflare's order.
const CF_KEYS = [
  'inWaitingRoom',
  'waitTimeKnown',
  'waitTime',
  'waitTime25Percentile',
  'waitTime50Percentile',
  'waitTime75Percentile',
  'waitTimeFormatted',
  'queueIsFull',
  'queueAll',
  'lastUpdated',
  'refreshIntervalSeconds',
  'queueingMethod',
  'isFIFOQueue',
  'isRandomQueue',
  'isPassthroughQueue',
  'isRejectQueue',
  'isEventActive',
  'isEventPrequeueing',
  'timeUntilEventStart',
  'timeUntilEventStartFormatted',
  'timeUntilEventEnd',
  'timeUntilEventEndFormatted',
  'shuffleAtEventStart',
];

test('(f) a Cloudflare JSON client in the page reads cfWaitingRoom', async (t) => {
  // refresh_interval 30 s: the page's Refresh header must not reload it under page.evaluate.
  const room = await roomFor(t, { room: { refresh_interval: '30s' } });
  await takeTheOnlyPlace(room);
  const context = await newContext(t, browser());
  const page = await context.newPage();
  await page.goto(`${room.base}/product/42`);
  assert.equal(await shownNumber(page), '1');

  // What a Cloudflare-mode UI does, verbatim: same URL, Accept: application/json, cookies sent.
  const got = await page.evaluate(async () => {
    const res = await fetch(location.href, { headers: { Accept: 'application/json' } });
    const text = await res.text();
    const data = JSON.parse(text);
    const cf = data.cfWaitingRoom;
    // A minimal Cloudflare-style UI rendering from the object.
    const ui = cf.inWaitingRoom
      ? `Estimated wait: ${cf.waitTimeKnown ? cf.waitTimeFormatted : 'unknown'}; ` +
        `checking again in ${cf.refreshIntervalSeconds} s`
      : 'in';
    return {
      status: res.status,
      contentType: res.headers.get('content-type'),
      cacheControl: res.headers.get('cache-control'),
      keys: Object.keys(cf),
      cf,
      waitroom: data.waitroom,
      ui,
    };
  });
  assert.equal(got.status, 200);
  assert.match(got.contentType, /^application\/json/);
  assert.match(got.cacheControl || '', /no-store/);
  assert.deepEqual(got.keys, CF_KEYS);
  const cf = got.cf;
  assert.equal(cf.inWaitingRoom, true);
  assert.equal(cf.refreshIntervalSeconds, 30);
  assert.equal(typeof cf.waitTimeKnown, 'boolean');
  assert.equal(typeof cf.waitTimeFormatted, 'string');
  if (cf.waitTimeKnown) {
    assert.match(cf.waitTimeFormatted, /^\d+ minutes?( to \d+ minutes?)?$/);
  } else {
    assert.equal(cf.waitTimeFormatted, 'unavailable');
    assert.equal(cf.waitTime, 0);
  }
  assert.equal(cf.queueingMethod, 'fifo');
  assert.equal(cf.isFIFOQueue, true);
  assert.equal(cf.isRejectQueue, false);
  assert.ok(!Number.isNaN(Date.parse(cf.lastUpdated)), cf.lastUpdated);
  assert.equal(cf.isEventActive, false);
  assert.equal(cf.timeUntilEventStartFormatted, 'unavailable');
  assert.deepEqual(
    { position: got.waitroom.position, queued: got.waitroom.queued, admitted: got.waitroom.admitted },
    { position: 1, queued: 1, admitted: false },
  );
  assert.match(got.ui, /^Estimated wait: .+; checking again in 30 s$/);

  // Cloudflare's rule: anything but exactly application/json gets the HTML page; so does the
  // query flag's absence. `?waitingroom_json=1` is the other way in.
  const other = await page.evaluate(async () => {
    const a = await fetch(location.href, { headers: { Accept: 'application/json, text/html' } });
    const b = await fetch(`${location.pathname}?waitingroom_json=1`);
    return {
      mixed: a.headers.get('content-type'),
      flag: b.headers.get('content-type'),
      flagBody: await b.json(),
    };
  });
  assert.match(other.mixed, /^text\/html/);
  assert.match(other.flag, /^application\/json/);
  assert.equal(other.flagBody.cfWaitingRoom.inWaitingRoom, true);

  // Asking in JSON did not cost the place nor add one.
  const state = await room.state();
  assert.equal(state.queue_length, 1);
  assert.equal(await shownNumber(page), '1');
});
