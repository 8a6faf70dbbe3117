'use strict';
// (l) The page in the visitor's language (default_template_language = "auto"): Arabic right to
//     left, Russian and Polish left to right (Debian's Chromium here has no CJK fonts). The
//     browser's Accept-Language picks the locale; the page's script then follows the line in it
//     (its numbers, and its plural forms from Intl.PluralRules: Arabic's "few" for 4 becomes
//     "two" for 2). Screenshots waiting-ar.png, waiting-ru.png, waiting-pl.png (phone).

const { test } = require('node:test');
const assert = require('node:assert/strict');
const {
  useBrowser,
  newContext,
  roomFor,
  takeTheOnlyPlace,
  shownNumber,
  textOf,
  screenshot,
  eventually,
  VIEWPORTS,
} = require('../lib/harness');

const browser = useBrowser();

const LANGUAGES = [
  {
    locale: 'ar-EG',
    dir: 'rtl',
    file: 'waiting-ar.png',
    before: 'رقمك في الطابور',
    // Place 4 of 4, then 2 of 2, in Arabic-Indic digits; 2 has its own form.
    first: '٤',
    second: '٢',
    total: 'شخصان ينتظران إجمالًا',
  },
  {
    locale: 'ru-RU',
    dir: 'ltr',
    file: 'waiting-ru.png',
    before: 'Ваш номер',
    first: '4',
    second: '2',
    total: 'Всего ждут 2 человека',
  },
  {
    locale: 'pl-PL',
    dir: 'ltr',
    file: 'waiting-pl.png',
    before: 'Jesteś numerem',
    first: '4',
    second: '2',
    total: 'Łącznie czekają 2 osoby',
  },
];

for (const lang of LANGUAGES) {
  test(`(l) ${lang.locale}: the page speaks it, ${lang.dir}, and follows the line in it`, async (t) => {
    const room = await roomFor(t, {
      room: { refresh_interval: '20s' },
      page: { default_template_language: 'auto' },
    });
    await takeTheOnlyPlace(room);
    const ahead = [];
    for (let i = 0; i < 3; i++) {
      const v = room.visitor();
      await v.get(`/product/${i + 100}`);
      ahead.push(v);
    }

    const context = await newContext(t, browser(), { ...VIEWPORTS.phone, locale: lang.locale });
    const page = await context.newPage();
    const resp = await page.goto(`${room.base}/product/42`);
    assert.equal(resp.status(), 200);
    assert.equal(resp.headers()['content-language'], lang.locale);
    assert.equal(await page.getAttribute('html', 'lang'), lang.locale);
    assert.equal(await page.getAttribute('html', 'dir'), lang.dir);
    assert.equal(await shownNumber(page), lang.first);
    assert.equal(await textOf(page, '#wr-place .lbl'), lang.before);

    // Two ahead give up: the script writes the new place and count in the page's language.
    await ahead[0].leave();
    await ahead[1].leave();
    await eventually('the place to move', async () => (await shownNumber(page)) === lang.second, {
      timeout: 15000,
    });
    await eventually('the count in its plural form', async () => (await textOf(page, '#wr-sub')) === lang.total);

    // The progress bar fills from the start of the line of text: the right in Arabic.
    const [bar, fill] = [await page.locator('#wr-bar').boundingBox(), await page.locator('#wr-fill').boundingBox()];
    assert.ok(fill.width > 10 && fill.width < bar.width, `some progress: ${fill.width} of ${bar.width}`);
    const fromStart = lang.dir === 'rtl' ? bar.x + bar.width - (fill.x + fill.width) : fill.x - bar.x;
    assert.ok(Math.abs(fromStart) < 2, `${lang.locale}: the fill starts at the ${lang.dir} start (${fromStart})`);

    await screenshot(page, lang.file);
  });
}
