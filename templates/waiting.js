(function () {
  "use strict";
  var root = document.getElementById("wr");
  if (!root || !window.setTimeout) return;
  function $(id) { return document.getElementById(id); }
  function num(v) { var n = parseInt(v, 10); return isFinite(n) && n >= 0 ? n : null; }
  var T = {};
  try { T = JSON.parse(($("wr-i18n") || {}).textContent || "{}") || {}; } catch (e) {}
  var locale = T.locale || "en-US";
  function fmt(n) { try { return n.toLocaleString(locale); } catch (e) { return String(n); } }
  /* The CLDR plural category the server chose by the same rules; without Intl, English's. */
  var plurals = null;
  try { plurals = new Intl.PluralRules(locale); } catch (e) {}
  function form(n, forms) {
    var f = forms || {}, category = plurals ? plurals.select(n) : n === 1 ? "one" : "other";
    return String(f[category] || f.other);
  }
  function count(n, forms) { return form(n, forms).replace("{n}", fmt(n)); }
  function minutes(n) { return count(n, T.minutes); }
  function waitText(cf) {
    var low = cf.waitTime25Percentile, high = cf.waitTime75Percentile;
    if (cf.isRandomQueue && typeof low === "number" && typeof high === "number") {
      return low === high ? minutes(low) : String(T.range).replace("{low}", minutes(low)).replace("{high}", minutes(high));
    }
    return minutes(cf.waitTime);
  }
  function text(node, t) { if (node && node.textContent !== t) node.textContent = t; }
  function part(tag, cls, t) { var s = document.createElement(tag); s.className = cls; s.textContent = t; return s; }

  var url = root.getAttribute("data-status-url") || "";
  var every = Math.max(1, num(root.getAttribute("data-refresh")) || 20);
  var initial = num(root.getAttribute("data-initial"));
  var pos = num(root.getAttribute("data-position"));
  var queued = num(root.getAttribute("data-queued")) || 0;
  var baseTitle = root.getAttribute("data-title") || document.title;
  var done = false, busy = false, timer = 0, fails = 0, lastPush = 0, es = null;

  function renderPlace() {
    var p = $("wr-place"), key = pos + "|" + queued;
    if (!p || p.getAttribute("data-key") === key) return;
    p.setAttribute("data-key", key);
    var parts = pos
      ? [part("span", "lbl", T.numberBefore), part("strong", "num", fmt(pos)), part("span", "lbl", T.numberAfter)]
      : [part("strong", "num", fmt(queued)), part("span", "lbl", form(queued, T.waiting))];
    while (p.firstChild) p.removeChild(p.firstChild);
    for (var i = 0; i < parts.length; i++) {
      if (i) p.appendChild(document.createTextNode(" "));
      p.appendChild(parts[i]);
    }
    text($("wr-sub"), pos ? (queued ? count(queued, T.total) : "") : countdown ? "" : T.randomNote);
    document.title = (pos ? String(T.titlePosition).replace("{n}", fmt(pos)) + " · " : "") + baseTitle;
  }

  function renderProgress(pct) {
    var bar = $("wr-bar"), fill = $("wr-fill");
    if (!bar || !fill) return;
    if (pct === null && pos && initial) pct = pos >= initial ? 0 : Math.floor((initial - pos) * 100 / initial);
    if (pct === null) {
      bar.className = "bar indeterminate";
      bar.removeAttribute("aria-valuenow");
      bar.removeAttribute("aria-valuetext");
      fill.style.width = "";
    } else {
      bar.className = "bar";
      bar.setAttribute("aria-valuenow", String(pct));
      bar.setAttribute("aria-valuetext", String(T.progressValue).replace("{pct}", fmt(pct)));
      fill.style.width = pct + "%";
    }
  }

  function renderTime(iso) {
    var t = $("wr-time");
    if (!t || typeof iso !== "string") return;
    var d = new Date(iso);
    if (isNaN(d.getTime())) return;
    t.setAttribute("datetime", iso);
    text(t, d.toLocaleTimeString(locale, { hour: "numeric", minute: "2-digit", second: "2-digit" }));
    t.title = d.toLocaleString(locale);
  }

  function connection(ok) {
    var live = $("wr-live");
    if (live) live.className = ok ? "live" : "live off";
    text($("wr-conn"), ok ? T.live : T.offline);
  }

  /* The pre-queue's countdown, on the server's clock. At the start the page reloads into the
     visitor's place, spread over one refresh interval so the whole pre-queue does not arrive in
     the same second. */
  var countdown = $("wr-countdown"), starting = false;
  var startsAt = countdown ? Date.parse(($("wr-countdown-left") || {}).getAttribute("datetime")) : NaN;
  var skew = countdown ? (num(countdown.getAttribute("data-now")) || Date.now()) - Date.now() : 0;
  /* The clock in the page's digits (Arabic-Indic in ar-EG), like its other numbers. */
  function digits(n, width) {
    try { return n.toLocaleString(locale, { minimumIntegerDigits: width, useGrouping: false }); }
    catch (e) { return (width > 1 && n < 10 ? "0" : "") + n; }
  }
  function startSoon() {
    if (starting || done) return;
    starting = true;
    setTimeout(function () { location.reload(); }, Math.random() * every * 1000);
  }
  function tick() {
    if (isNaN(startsAt)) return;
    var s = Math.max(0, Math.ceil((startsAt - Date.now() - skew) / 1000));
    var h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    text($("wr-countdown-left"), (h ? digits(h, 1) + ":" + digits(m, 2) : digits(m, 1)) + ":" + digits(s % 60, 2));
    if (s > 0) setTimeout(tick, 1000 - ((Date.now() + skew) % 1000)); else startSoon();
  }

  /* "Tell me when it is my turn", opt-in and remembered over the page's reloads: permission
     is asked on the click only; refused or missing, the tab's title and icon say it alone. */
  var box = $("wr-notify-box"), button = $("wr-notify"), chime = $("wr-sound"), audio = null, saved = null;
  var N = window.Notification;
  try { saved = window.sessionStorage; } catch (e) {}
  function recalled(key) { try { return saved.getItem(key) === "1"; } catch (e) { return false; } }
  function keep(key, on) { try { if (on) saved.setItem(key, "1"); else saved.removeItem(key); } catch (e) {} }
  var notifying = recalled("wr-notify");
  function permitted() { return !!N && N.permission === "granted"; }
  function showNotify() {
    button.setAttribute("aria-pressed", String(notifying));
    text($("wr-notify-state"), notifying ? (permitted() ? T.notifyOn : T.notifyTitleOnly) : "");
  }
  /* A short tone made here: no sound file to fetch. Browsers let a page play only once the
     visitor has clicked on it, so the context is opened on the click that asks for it. */
  function sound(play) {
    try {
      audio = audio || new (window.AudioContext || window.webkitAudioContext)();
      audio.resume();
      if (!play) return;
      var tone = audio.createOscillator();
      tone.connect(audio.destination);
      tone.start();
      tone.stop(audio.currentTime + 0.3);
    } catch (e) {}
  }
  if (box && button && chime) {
    box.hidden = false;
    chime.checked = recalled("wr-sound");
    button.onclick = function () {
      notifying = !notifying;
      keep("wr-notify", notifying);
      if (notifying && N && N.permission === "default") {
        try { var asked = N.requestPermission(showNotify); if (asked) asked.then(showNotify, showNotify); } catch (e) {}
      }
      if (chime.checked) sound();
      showNotify();
    };
    chime.onchange = function () { keep("wr-sound", chime.checked); if (chime.checked) sound(); };
    showNotify();
  }
  /* The turn, told while the tab is hidden: its title, a green icon, the tone, the notification. */
  function tellTurn() {
    document.title = T.turnTitle + " · " + baseTitle;
    try {
      var canvas = document.createElement("canvas"), pen = canvas.getContext("2d");
      canvas.width = canvas.height = 32;
      pen.fillStyle = "#16a34a";
      pen.arc(16, 16, 14, 0, 7);
      pen.fill();
      document.querySelector('link[rel="icon"]').href = canvas.toDataURL();
    } catch (e) {}
    if (chime && chime.checked) sound(true);
    if (!permitted()) return;
    try {
      var shown = new N(T.turnTitle, { body: T.turnBody, tag: "waitroom-turn" });
      shown.onclick = function () { window.focus(); shown.close(); };
    } catch (e) {}
  }

  function stop() {
    done = true;
    clearTimeout(timer);
    if (es) { try { es.close(); } catch (e) {} }
  }

  function admit() {
    if (done) return;
    stop();
    renderProgress(100);
    text($("wr-conn"), T.yourTurn);
    if (!notifying || !document.hidden) { location.reload(); return; }
    /* In the background with the visitor asking to be told: the status call claims the
       admission (its answer sets the pass), the page's own Refresh is stopped so the tab keeps
       saying it, and the page goes in when the visitor comes back. */
    try { window.stop(); } catch (e) {}
    document.addEventListener("visibilitychange", function () { if (!document.hidden) location.reload(); });
    if (!window.fetch) { tellTurn(); return; }
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" })
      .then(tellTurn, tellTurn);
  }

  /* Leaving: the form posts itself (no script needed); the page stops following the line so
     that no poll races the leave and takes a new place. */
  var leaving = $("wr-leave-form");
  if (leaving) leaving.addEventListener("submit", stop);

  function handle(data) {
    if (done || !data || typeof data !== "object") return;
    var cf = data.cfWaitingRoom || {}, w = data.waitroom || {};
    /* Admitted, or the room was switched live (closed, passthrough): the next page load shows
       what the visitor now gets. */
    if (w.admitted === true || cf.inWaitingRoom === false || cf.isRejectQueue === true ||
        cf.isPassthroughQueue === true) { admit(); return; }
    if (countdown && cf.isEventPrequeueing === false) startSoon();
    if (w.position === null) pos = null;
    else if (typeof w.position === "number" && w.position >= 1) pos = Math.floor(w.position);
    if (typeof w.queued === "number" && w.queued >= 0) queued = Math.floor(w.queued);
    renderPlace();
    renderProgress(null);
    if (typeof cf.waitTimeKnown === "boolean") {
      var known = cf.waitTimeKnown && typeof cf.waitTime === "number";
      text($("wr-wait"), known ? waitText(cf) : T.notKnown);
      var note = $("wr-wait-note");
      if (note) note.hidden = !!known;
    }
    renderTime(cf.lastUpdated);
    if (typeof cf.refreshIntervalSeconds === "number" && cf.refreshIntervalSeconds >= 1) every = cf.refreshIntervalSeconds;
  }

  function safely(data) { try { handle(data); } catch (e) {} }

  function schedule() {
    if (done) return;
    clearTimeout(timer);
    timer = setTimeout(poll, every * 1000 * Math.min(4, 1 + fails));
  }

  function settle() { busy = false; schedule(); }

  function poll() {
    if (done || busy) return;
    if (!window.fetch || Date.now() - lastPush < every * 900) { schedule(); return; }
    busy = true;
    fetch(url, { headers: { Accept: "application/json" }, credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error("status " + r.status); return r.json(); })
      .then(function (data) { fails = 0; connection(true); safely(data); },
            function () { fails++; if (fails > 1) connection(false); })
      .then(settle, settle);
  }

  try {
    renderTime($("wr-time") && $("wr-time").getAttribute("datetime"));
    if (window.EventSource) {
      es = new EventSource(url.replace("/status", "/events"));
      es.onmessage = function (ev) {
        lastPush = Date.now();
        fails = 0;
        connection(true);
        try { safely(JSON.parse(ev.data)); } catch (e) {}
      };
      es.onerror = function () { try { es.close(); } catch (e) {} es = null; lastPush = 0; };
    }
  } catch (e) {}
  document.addEventListener("visibilitychange", function () { if (!document.hidden) { lastPush = 0; poll(); } });
  schedule();
  if (countdown) tick();
})();
