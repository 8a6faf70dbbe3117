// The console: the live view from the admin listener's event stream, and the controls, each a
// call of the admin API (the same as curl's) with the session's CSRF token.
(function () {
  "use strict";
  var csrf = document.querySelector('meta[name="csrf-token"]').content;
  var roomsEl = document.getElementById("rooms");
  var messageEl = document.getElementById("message");
  var liveEl = document.getElementById("live");
  var dialog = document.getElementById("confirm");
  var template = document.getElementById("room-template");
  var rooms = {};

  function say(text, problem) {
    messageEl.textContent = text;
    messageEl.className = problem ? "problem" : "";
  }

  function api(method, path, body) {
    var init = { method: method, credentials: "same-origin", headers: { "X-CSRF-Token": csrf } };
    if (body !== undefined) {
      init.headers["Content-Type"] = method === "PATCH" ? "application/merge-patch+json" : "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).then(function (response) {
      return response.text().then(function (text) {
        var json = null;
        try { json = JSON.parse(text); } catch (e) { json = null; }
        if (response.status === 401) { location.reload(); }
        if (!response.ok) {
          throw new Error((json && json.error) || response.status + " " + response.statusText);
        }
        return json;
      });
    });
  }

  // Runs `action` once the operator confirmed `text` in the dialog; `cancelled` otherwise.
  function confirmThen(text, action, cancelled) {
    document.getElementById("confirm-text").textContent = text;
    dialog.returnValue = "";
    dialog.onclose = function () {
      if (dialog.returnValue === "confirm") { action(); } else if (cancelled) { cancelled(); }
    };
    dialog.showModal();
  }

  function change(roomId, method, rest, body, done) {
    say("Applying…");
    api(method, "/admin/rooms/" + encodeURIComponent(roomId) + "/" + rest, body)
      .then(function (answer) {
        say("Applied: " + method + " " + rest + (body === undefined ? "" : " " + JSON.stringify(body)));
        if (done) { done(answer); }
        loadAudit();
      })
      .catch(function (e) { say("Not applied: " + e.message, true); loadAudit(); });
  }

  function field(room, name) { return room.el.querySelector('[data-field="' + name + '"]'); }
  function control(room, name) { return room.el.querySelector('[data-control="' + name + '"]'); }

  function seconds(s) {
    if (s === null || s === undefined) { return "unknown"; }
    if (s < 90) { return s + " s"; }
    return "about " + Math.round(s / 60) + " min";
  }

  function shown(value) { return value === null || value === undefined ? "–" : String(value); }

  var switchText = {
    queue_all: [
      "Every newcomer will wait in line and nobody new is let in until you turn this off. Visitors already inside keep going.",
      "Newcomers are let in again as the limits allow."
    ],
    suspended: [
      "The waiting room switches off: every visitor goes straight to the shop and no limit applies.",
      "The waiting room switches on again: newcomers are held to the limits and may have to queue."
    ]
  };

  var methodText = {
    fifo: "Newcomers are admitted in the order they arrived.",
    random: "Each admission draws at random from everyone waiting.",
    lottery: "Arrivals within each lottery window are shuffled, then admitted in that order.",
    passthrough: "Everyone is let in at once and only counted: the limits no longer hold anyone back.",
    reject: "The line closes: newcomers see the closed page and nobody new can join."
  };

  function build(id) {
    var el = template.content.firstElementChild.cloneNode(true);
    var room = { id: id, el: el, state: null };
    el.querySelector("h2").id = "room-" + id;
    el.setAttribute("aria-labelledby", "room-" + id);
    el.querySelectorAll("input, select").forEach(function (input, i) {
      input.id = "room-" + id + "-" + i;
      input.addEventListener("input", function () { input.dataset.dirty = "1"; });
    });

    ["queue_all", "suspended"].forEach(function (name) {
      var box = control(room, name);
      box.addEventListener("change", function () {
        var on = box.checked;
        box.checked = !on;
        confirmThen(switchText[name][on ? 0 : 1], function () {
          var body = {};
          body[name] = on;
          change(id, "PATCH", "config", body, function () { box.checked = on; });
        });
      });
    });

    el.querySelector('[data-form="limits"]').addEventListener("submit", function (event) {
      event.preventDefault();
      var total = Number(control(room, "total_active_users").value);
      var rate = Number(control(room, "new_users_per_minute").value);
      var was = room.state || {};
      var body = { total_active_users: total, new_users_per_minute: rate };
      var apply = function () {
        change(id, "PATCH", "config", body, function () {
          control(room, "total_active_users").dataset.dirty = "";
          control(room, "new_users_per_minute").dataset.dirty = "";
        });
      };
      var lowered = [];
      if (total < was.total_active_users) {
        lowered.push("capacity from " + was.total_active_users + " to " + total +
          " (nobody inside is sent out; admissions pause until fewer than " + total + " are inside)");
      }
      if (rate < was.new_users_per_minute) {
        lowered.push("the rate from " + was.new_users_per_minute + " to " + rate + " new visitors a minute (the line moves slower)");
      }
      if (lowered.length) { confirmThen("This lowers " + lowered.join(" and ") + ".", apply); } else { apply(); }
    });

    el.querySelector('[data-form="method"]').addEventListener("submit", function (event) {
      event.preventDefault();
      var select = control(room, "queueing_method");
      var method = select.value;
      confirmThen("Queueing method " + method + ": " + methodText[method], function () {
        change(id, "PATCH", "config", { queueing_method: method }, function () { select.dataset.dirty = ""; });
      });
    });

    el.querySelector('[data-form="revoke"]').addEventListener("submit", function (event) {
      event.preventDefault();
      var input = control(room, "pass_id");
      var passId = input.value.trim();
      confirmThen("The visitor holding pass " + passId + " loses it at once and has to queue again to come back.", function () {
        change(id, "POST", "revoke", { pass_id: passId }, function (answer) {
          say(answer && answer.revoked ? "Pass " + passId + " revoked." : "No live pass " + passId + ": nothing revoked.");
          input.value = "";
        });
      });
    });

    var eventForm = el.querySelector('[data-form="add-event"]');
    eventForm.addEventListener("submit", function (event) {
      event.preventDefault();
      if (room.editing) { saveEdit(room); return; }
      var shown = eventFormValues(room);
      var body = { name: shown.name, event_start_time: instant(shown.start), event_end_time: instant(shown.end) };
      if (shown.prequeue) { body.prequeue_start_time = instant(shown.prequeue); }
      if (shown.shuffle) { body.shuffle_at_event_start = true; }
      if (shown.total) { body.total_active_users = Number(shown.total); }
      if (shown.rate) { body.new_users_per_minute = Number(shown.rate); }
      var text = "Event " + body.name + " governs the room from " +
        new Date(body.prequeue_start_time || body.event_start_time).toLocaleString() + " to " +
        new Date(body.event_end_time).toLocaleString() +
        (body.prequeue_start_time ? "; during its pre-queue every newcomer waits and nobody new is let in" : "") +
        (body.total_active_users ? "; its limits replace the room's while it runs" : "") + ".";
      confirmThen(text, function () {
        change(id, "POST", "events", body, function () { eventForm.reset(); loadEvents(room); });
      });
    });
    el.querySelector('[data-action="stop-editing"]').addEventListener("click", function () { stopEditing(room); });

    el.querySelector('[data-action="autopilot"]').addEventListener("click", function () {
      var paused = !(room.state && room.state.autopilot && room.state.autopilot.paused);
      var text = paused
        ? "The autopilot stops changing the limits; those in force now stay until you resume it."
        : "The autopilot judges the origin again and may raise or lower the limits.";
      confirmThen(text, function () { change(id, "POST", "autopilot", { paused: paused }); });
    });

    roomsEl.appendChild(el);
    rooms[id] = room;
    loadEvents(room);
    drawHistory(room);
    return room;
  }

  function eventButton(text, danger, onClick) {
    var button = document.createElement("button");
    button.type = "button";
    button.textContent = text;
    button.className = danger ? "danger" : "quiet";
    button.addEventListener("click", onClick);
    return button;
  }

  // The room's scheduled events, each with its switch (call off / reinstate) and delete.
  function loadEvents(room) {
    api("GET", "/admin/rooms/" + encodeURIComponent(room.id) + "/events").then(function (answer) {
      var list = field(room, "events");
      var current = answer.current ? answer.current.name : null;
      room.events = answer.events;
      showNextEvent(room);
      list.textContent = "";
      if (!answer.events.length) {
        var none = document.createElement("li");
        none.textContent = "None scheduled.";
        list.appendChild(none);
      }
      answer.events.forEach(function (event) {
        var item = document.createElement("li");
        var title = document.createElement("strong");
        title.textContent = event.name;
        item.appendChild(title);
        var when = document.createElement("div");
        when.className = "muted";
        when.textContent = (event.prequeue_start_time ? "pre-queue " + event.prequeue_start_time + ", " : "") +
          event.event_start_time + " to " + event.event_end_time +
          (event.total_active_users ? " · " + event.total_active_users + " inside at most, " +
            event.new_users_per_minute + " new a minute" : "") +
          (event.suspended ? " · called off" : "") + (event.name === current ? " · governing now" : "");
        item.appendChild(when);
        var path = "events/" + encodeURIComponent(event.name);
        item.appendChild(eventButton("Edit", false, function () { editEvent(room, event); }));
        item.appendChild(event.suspended
          ? eventButton("Reinstate", false, function () {
            confirmThen("Event " + event.name + " governs the room again at its times.", function () {
              change(room.id, "PATCH", path, { suspended: false }, function () { loadEvents(room); });
            });
          })
          : eventButton("Call off", true, function () {
            confirmThen("Event " + event.name + " is called off: the room's own settings apply at its times" +
              (event.name === current ? ", from now on" : "") + ".", function () {
              change(room.id, "PATCH", path, { suspended: true }, function () { loadEvents(room); });
            });
          }));
        item.appendChild(eventButton("Delete", true, function () {
          confirmThen("Event " + event.name + " is deleted (as if never scheduled).", function () {
            change(room.id, "DELETE", path, undefined, function () {
              if (room.editing && room.editing.event.name === event.name) { stopEditing(room); }
              loadEvents(room);
            });
          });
        }));
        list.appendChild(item);
      });
    }).catch(function (e) { say("The events did not load: " + e.message, true); });
  }

  // datetime-local has no offset: the browser's own time, sent as RFC 3339 UTC.
  function instant(local) { return local ? new Date(local).toISOString() : null; }

  // An RFC 3339 instant as a datetime-local value: the browser's own time, to the minute.
  function localInput(rfc3339) {
    var d = rfc3339 ? new Date(rfc3339) : null;
    if (!d || isNaN(d.getTime())) { return ""; }
    var two = function (n) { return (n < 10 ? "0" : "") + n; };
    return d.getFullYear() + "-" + two(d.getMonth() + 1) + "-" + two(d.getDate()) +
      "T" + two(d.getHours()) + ":" + two(d.getMinutes());
  }

  function optional(value) { return value === null || value === undefined ? "" : String(value); }

  // The event form as typed: the datetime-local values, the numbers as text ("" when empty).
  function eventFormValues(room) {
    var value = function (name) { return control(room, name).value; };
    return {
      name: value("event-name").trim(),
      prequeue: value("event-prequeue"),
      start: value("event-start"),
      end: value("event-end"),
      shuffle: control(room, "event-shuffle").checked,
      total: value("event-total"),
      rate: value("event-rate")
    };
  }

  function eventFormMode(room, title, submit, editing) {
    field(room, "event-form-title").textContent = title;
    room.el.querySelector('[data-action="save-event"]').textContent = submit;
    room.el.querySelector('[data-action="stop-editing"]').hidden = !editing;
  }

  // The event form filled with `event`: what the operator changes in it is sent as a merge
  // patch, so a time written with seconds or another offset is left as it is unless changed.
  function editEvent(room, event) {
    var shown = {
      name: event.name,
      prequeue: localInput(event.prequeue_start_time),
      start: localInput(event.event_start_time),
      end: localInput(event.event_end_time),
      shuffle: !!event.shuffle_at_event_start,
      total: optional(event.total_active_users),
      rate: optional(event.new_users_per_minute)
    };
    control(room, "event-name").value = shown.name;
    control(room, "event-prequeue").value = shown.prequeue;
    control(room, "event-start").value = shown.start;
    control(room, "event-end").value = shown.end;
    control(room, "event-shuffle").checked = shown.shuffle;
    control(room, "event-total").value = shown.total;
    control(room, "event-rate").value = shown.rate;
    room.editing = { event: event, shown: shown };
    eventFormMode(room, "Edit event " + event.name, "Save changes", true);
    room.el.querySelector('[data-form="add-event"]').closest("details").open = true;
    control(room, "event-name").focus();
  }

  function stopEditing(room) {
    room.editing = null;
    room.el.querySelector('[data-form="add-event"]').reset();
    eventFormMode(room, "Add an event", "Add event", false);
  }

  // Sends the keys the operator changed (an emptied optional field removes its key). An event
  // that governs the room now, or would from now on, asks first, listing the changes.
  function saveEdit(room) {
    var event = room.editing.event;
    var was = room.editing.shown;
    var now = eventFormValues(room);
    var patch = {};
    var said = [];
    var time = function (local) { return local ? new Date(local).toLocaleString() : "none"; };
    var limit = function (value) { return value || "the room's"; };
    var onOff = function (on) { return on ? "on" : "off"; };
    var changed = function (key, label, part, words, sent) {
      if (was[part] === now[part]) { return; }
      patch[key] = sent;
      said.push(label + ": " + words(was[part]) + " → " + words(now[part]));
    };
    changed("name", "name", "name", String, now.name);
    changed("prequeue_start_time", "pre-queue opens", "prequeue", time, instant(now.prequeue));
    changed("event_start_time", "starts", "start", time, instant(now.start));
    changed("event_end_time", "ends", "end", time, instant(now.end));
    changed("shuffle_at_event_start", "shuffle at the start", "shuffle", onOff, now.shuffle);
    changed("total_active_users", "total active users", "total", limit, now.total ? Number(now.total) : null);
    changed("new_users_per_minute", "new users per minute", "rate", limit, now.rate ? Number(now.rate) : null);
    if (!said.length) { say("Nothing changed in event " + event.name + "."); return; }
    var at = Date.now();
    var governs = !!room.state && room.state.event === event.name;
    var willGovern = !event.suspended && new Date(now.prequeue || now.start).getTime() <= at &&
      at < new Date(now.end).getTime();
    var apply = function () {
      change(room.id, "PATCH", "events/" + encodeURIComponent(event.name), patch, function () {
        stopEditing(room);
        loadEvents(room);
      });
    };
    var changes = said.join("; ") + ".";
    if (governs && willGovern) {
      confirmThen("Event " + event.name + " governs the room now: this applies at once. " + changes, apply);
    } else if (governs) {
      confirmThen("Event " + event.name + " governs the room now and stops governing it: the room's own settings apply again. " + changes, apply);
    } else if (willGovern) {
      confirmThen("Event " + event.name + " governs the room from now on. " + changes, apply);
    } else {
      apply();
    }
  }

  // The first event still to open that is not called off: the one governing now has opened.
  function showNextEvent(room) {
    if (!room.events) { return; }
    var at = Date.now();
    var opens = function (event) { return new Date(event.prequeue_start_time || event.event_start_time).getTime(); };
    var next = room.events.filter(function (event) { return !event.suspended && opens(event) > at; })
      .sort(function (a, b) { return opens(a) - opens(b); })[0];
    field(room, "next-event").textContent = next
      ? next.name + ", " + (next.prequeue_start_time ? "pre-queue " : "") + new Date(opens(next)).toLocaleString()
      : "none";
  }

  function setValue(input, value) {
    if (document.activeElement !== input && !input.dataset.dirty) { input.value = value; }
  }

  function render(state) {
    var room = rooms[state.room] || build(state.room);
    // The event governing the room changed (one started or ended): its list says so again, and
    // the report is fetched again for its chart.
    var was = room.state;
    room.state = state;
    if (!was || was.event !== state.event) { drawHistory(room); }
    if (was && was.event !== state.event) { loadEvents(room); loadReport(); }
    field(room, "title").textContent = state.name ? state.name + " (" + state.room + ")" : state.room;
    field(room, "inside").textContent = shown(state.occupancy) + " / " + shown(state.total_active_users);
    field(room, "waiting").textContent = shown(state.queue_length);
    field(room, "admitted").textContent = shown(state.admitted_last_minute);
    field(room, "wait").textContent = state.queue_all ? "unknown (queue_all)" : seconds(state.wait_estimate_seconds);
    var store = field(room, "store");
    store.textContent = state.store_ok ? "up" : "down" + (state.stale_seconds !== null ? " (figures " + Math.round(state.stale_seconds) + " s old)" : "");
    store.className = state.store_ok ? "up" : "down";
    field(room, "leader").textContent = state.is_leader ? "this instance (" + state.instance + ")" : shown(state.leader);
    field(room, "mode").textContent = state.queueing_method +
      (state.suspended ? ", suspended" : "") + (state.queue_all ? ", queue_all" : "") +
      (state.event ? ", event " + state.event : "");
    var pilot = state.autopilot || {};
    field(room, "autopilot").textContent = pilot.enabled
      ? (pilot.paused ? "paused" : pilot.phase) + ", " + shown(pilot.total_active_users) + " inside at most, " +
        shown(pilot.new_users_per_minute) + " new a minute"
      : "off";
    showNextEvent(room);
    room.el.querySelector('[data-part="autopilot"]').hidden = !pilot.enabled;
    field(room, "autopilot-reason").textContent = pilot.reason || "";
    room.el.querySelector('[data-action="autopilot"]').textContent = pilot.paused ? "Resume the autopilot" : "Pause the autopilot";
    control(room, "queue_all").checked = !!state.queue_all;
    control(room, "suspended").checked = !!state.suspended;
    setValue(control(room, "total_active_users"), state.total_active_users);
    setValue(control(room, "new_users_per_minute"), state.new_users_per_minute);
    setValue(control(room, "queueing_method"), state.queueing_method);
  }

  function cell(row, text) {
    var td = document.createElement("td");
    td.textContent = text;
    row.appendChild(td);
  }

  function loadAudit() {
    api("GET", "/admin/audit").then(function (answer) {
      var body = document.getElementById("audit");
      body.textContent = "";
      (answer.entries || []).slice(0, 50).forEach(function (entry) {
        var row = document.createElement("tr");
        cell(row, entry.at);
        cell(row, entry.who);
        cell(row, shown(entry.client));
        cell(row, entry.method + " " + entry.path);
        cell(row, JSON.stringify(entry.changed));
        cell(row, String(entry.status));
        body.appendChild(row);
      });
    }).catch(function (e) { say("The audit log did not load: " + e.message, true); });
  }

  // The drop report: figures, and the timeline drawn as the HTML report draws it (lines for
  // inside and waiting, a bar per minute for admitted, one scale).
  var SVG = "http://www.w3.org/2000/svg";
  var CHART_WIDTH = 720, CHART_HEIGHT = 200;

  function svg(name, attributes) {
    var el = document.createElementNS(SVG, name);
    Object.keys(attributes).forEach(function (key) { el.setAttribute(key, attributes[key]); });
    return el;
  }

  // The timeline as an SVG: lines for inside and waiting, a bar per minute for admitted, on one
  // scale. By default the points sit side by side; with `span` ({ from: ms, minutes: n }) each
  // sits at its own minute of the span, so a minute with no record (an outage, or before the
  // proxy started) is a gap. `describe(facts)` gives the text alternative.
  function chart(timeline, span, describe) {
    var slots = span ? span.minutes : Math.max(timeline.length, 1);
    var placed = [];
    timeline.forEach(function (p, i) {
      var slot = span ? Math.round((Date.parse(p.minute) - span.from) / 60000) : i;
      if (slot >= 0 && slot < slots) { placed.push({ p: p, slot: slot }); }
    });
    var top = 1;
    placed.forEach(function (o) { top = Math.max(top, o.p.inside, o.p.waiting, o.p.admitted); });
    var step = CHART_WIDTH / slots;
    // A little room above the top of the scale, so that a line there is not cut in half.
    function y(v) { return CHART_HEIGHT - (CHART_HEIGHT - 4) * v / top; }
    // One polyline per run of consecutive minutes; a lone minute is a short level stroke.
    function lines(name) {
      var runs = [];
      placed.forEach(function (o, i) {
        if (i === 0 || o.slot !== placed[i - 1].slot + 1) { runs.push([]); }
        runs[runs.length - 1].push(o);
      });
      return runs.map(function (run) {
        var points = run.length === 1
          ? [step * (run[0].slot + 0.1), step * (run[0].slot + 0.9)].map(function (x) {
            return x.toFixed(1) + "," + y(run[0].p[name]).toFixed(1);
          })
          : run.map(function (o) { return (step * (o.slot + 0.5)).toFixed(1) + "," + y(o.p[name]).toFixed(1); });
        return svg("polyline", { "class": name, points: points.join(" ") });
      });
    }
    var first = placed.length ? placed[0].p.minute : "";
    var last = placed.length ? placed[placed.length - 1].p.minute : "";
    var facts = { points: placed.map(function (o) { return o.p; }), top: top, first: first, last: last };
    var label = describe ? describe(facts)
      : "Per minute from " + first + " to " + last + ": inside, waiting (lines) and admitted (bars), scale 0 to " + top;
    var el = svg("svg", {
      // Stretched to the width it is given (its height is capped): a minute's slot keeps its
      // place across the whole width instead of the chart shrinking to the middle.
      "class": "chart", viewBox: "0 0 " + CHART_WIDTH + " " + CHART_HEIGHT, preserveAspectRatio: "none",
      role: "img", "aria-label": label
    });
    var title = svg("title", {});
    title.textContent = label;
    el.appendChild(title);
    placed.forEach(function (o) {
      if (o.p.admitted > 0) {
        el.appendChild(svg("rect", {
          "class": "admitted", x: step * o.slot + step * 0.2, y: y(o.p.admitted),
          width: step * 0.6, height: CHART_HEIGHT - y(o.p.admitted)
        }));
      }
    });
    lines("waiting").concat(lines("inside")).forEach(function (line) { el.appendChild(line); });
    return { el: el, top: top, first: first, last: last };
  }

  // The chart's key: `text`, then a swatch per series.
  function chartKey(text) {
    var key = document.createElement("p");
    key.className = "key muted";
    key.textContent = text;
    ["inside", "waiting", "admitted"].forEach(function (name) {
      var item = document.createElement("span");
      item.className = "k";
      var swatch = document.createElement("span");
      swatch.className = "swatch k-" + name;
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(name === "admitted" ? "admitted per minute" : name));
      key.appendChild(document.createTextNode(" "));
      key.appendChild(item);
    });
    return key;
  }

  function figure(list, name, value) {
    var div = document.createElement("div");
    var dt = document.createElement("dt");
    var dd = document.createElement("dd");
    dt.textContent = name;
    dd.textContent = value;
    div.appendChild(dt);
    div.appendChild(dd);
    list.appendChild(div);
  }

  function reportOf(title, figures, eventName) {
    var part = document.createElement("div");
    var heading = document.createElement("h3");
    heading.textContent = title;
    part.appendChild(heading);
    var list = document.createElement("dl");
    list.className = "figures";
    figure(list, "Admitted", figures.admitted);
    figure(list, "Joined the line", figures.joined);
    figure(list, "Gave up waiting", figures.abandoned);
    figure(list, "Wait p50 / p95 / max (s)", shown(figures.wait.p50) + " / " + shown(figures.wait.p95) + " / " + shown(figures.wait.max));
    figure(list, "Order kept (tau)", shown(figures.order_tau));
    figure(list, "Shop's server p95 (s)", shown(figures.origin.p95_seconds));
    figure(list, "Shop's server errors", figures.origin.error_rate === null ? "–" : (figures.origin.error_rate * 100).toFixed(2) + " % of " + figures.origin.requests);
    figure(list, "Revoked (ended / shared)", figures.revoked.ended + " / " + figures.revoked.shared);
    figure(list, "Challenges passed / failed", figures.challenges.passed + " / " + figures.challenges.failed);
    part.appendChild(list);
    if (figures.timeline.length) {
      var drawn = chart(figures.timeline);
      part.appendChild(drawn.el);
      part.appendChild(chartKey("0 to " + drawn.top + ", " + drawn.first + " to " + drawn.last + ":"));
    } else {
      var none = document.createElement("p");
      none.className = "muted";
      none.textContent = "No minute recorded in this span yet.";
      part.appendChild(none);
    }
    if (eventName) {
      var link = document.createElement("a");
      link.href = "/admin/report?format=html&event=" + encodeURIComponent(eventName);
      link.setAttribute("download", "");
      link.textContent = "Download this event's report (HTML)";
      part.appendChild(link);
    }
    return part;
  }

  // The live view's history: the charts of the last hour and of the event governing now, and
  // the revocations and challenges, all from the one report the page fetches once a minute
  // (the live numbers come from the event stream). `report` holds that answer.
  var report = null;
  var MINUTE = 60000;
  // The history keeps a day: an event open longer is drawn over its last day.
  var KEPT_MINUTES = 1440;

  // A time in the browser's zone: the hour and minute, with the date when not today.
  function clock(ms) {
    var d = new Date(ms);
    var time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
    return d.toDateString() === new Date().toDateString() ? time : d.toLocaleDateString() + " " + time;
  }

  function replace(el, child) {
    el.textContent = "";
    el.appendChild(child);
  }

  // The text alternative of a live chart: what it spans and the figures it shows.
  function describeSpan(what) {
    return function (facts) {
      var points = facts.points;
      if (!points.length) { return what + ": no minute recorded."; }
      var most = function (name) { return Math.max.apply(null, points.map(function (p) { return p[name]; })); };
      var latest = points[points.length - 1];
      var admitted = points.reduce(function (sum, p) { return sum + p.admitted; }, 0);
      return what + ", per minute from " + clock(Date.parse(facts.first)) + " to " +
        clock(Date.parse(facts.last)) + " (" + points.length + (points.length === 1 ? " minute" : " minutes") +
        " recorded): inside " + latest.inside + " at the last minute, " + most("inside") + " at most; waiting " +
        latest.waiting + " at the last minute, " + most("waiting") + " at most; admitted " + admitted +
        " in all, " + most("admitted") + " at most in a minute.";
    };
  }

  // `minutes` minutes to the report's own minute (the proxy's clock, not the browser's).
  function drawSpan(el, timeline, from, minutes, what) {
    var drawn = chart(timeline, { from: from, minutes: minutes }, describeSpan(what));
    if (!drawn.first) {
      var none = document.createElement("p");
      none.className = "muted";
      none.textContent = "No minute recorded in this span yet.";
      replace(el, none);
      return;
    }
    var part = document.createDocumentFragment();
    part.appendChild(drawn.el);
    part.appendChild(chartKey("0 to " + drawn.top + ", " + clock(from) + " to " +
      clock(from + (minutes - 1) * MINUTE) + ", a minute each:"));
    el.textContent = "";
    el.appendChild(part);
  }

  function drawHistory(room) {
    var mine = report && (report.rooms || []).filter(function (r) { return r.room === room.id; })[0];
    if (!mine) { return; }
    field(room, "revoked").textContent = mine.revoked.ended + " / " + mine.revoked.shared;
    field(room, "challenges").textContent = mine.challenges.passed + " / " + mine.challenges.failed;
    // Every instance's counts added up (on Redis, the shares they publish), unless the report
    // could not read the others' (`shares_merged: false`).
    var counted = mine.shares_merged !== false ? "the whole room's"
      : "as this instance (" + report.instance + ") alone counted them: the other instances' " +
        "counts could not be read";
    field(room, "counted").textContent = "Passes revoked and challenges: " +
      (mine.from ? "since " + clock(Date.parse(mine.from)) : "no minute recorded yet") +
      " (the history the proxy keeps, a day at most), " + counted + "; from the drop report, once a minute.";
    var generated = Date.parse(report.generated_at);
    var now = generated - generated % MINUTE;
    drawSpan(field(room, "last-hour-chart"), mine.timeline, now - 59 * MINUTE, 60, "The last hour");
    var name = room.state && room.state.event;
    var event = name && (mine.events || []).filter(function (e) { return e.event === name; })[0];
    room.el.querySelector('[data-part="since-event"]').hidden = !event;
    if (!event) { return; }
    var opens = Date.parse(event.opens);
    var from = Math.max(opens - opens % MINUTE, now - (KEPT_MINUTES - 1) * MINUTE);
    var minutes = Math.max(1, (now - from) / MINUTE + 1);
    var title = "Since event " + event.event + " opened (" + clock(opens) + ")";
    field(room, "since-event-title").textContent = title;
    drawSpan(field(room, "since-event-chart"), event.timeline, from, minutes, title);
  }

  // Answers arriving out of order: only the latest asked for is drawn.
  var reportAsked = 0;

  function loadReport() {
    var asked = ++reportAsked;
    api("GET", "/admin/report").then(function (answer) {
      if (asked !== reportAsked) { return; }
      report = answer;
      Object.keys(rooms).forEach(function (id) { drawHistory(rooms[id]); });
      var el = document.getElementById("report");
      el.textContent = "";
      (answer.rooms || []).forEach(function (room) {
        el.appendChild(reportOf(room.name + " (" + room.room + "), " + room.minutes + (room.minutes === 1 ? " minute" : " minutes"), room, null));
        (room.events || []).forEach(function (event) {
          el.appendChild(reportOf("Event " + event.event + " (" + event.opens + " to " + event.ends + ")", event, event.event));
        });
      });
    }).catch(function (e) { say("The report did not load: " + e.message, true); });
  }
  document.getElementById("report-refresh").addEventListener("click", loadReport);
  // A record a minute: once a minute is all the report can change.
  setInterval(loadReport, 60000);

  var source = new EventSource("/admin/console/events");
  source.addEventListener("state", function (event) {
    var answer = JSON.parse(event.data);
    (answer.rooms || []).forEach(render);
    liveEl.textContent = "live, updated " + new Date().toLocaleTimeString();
  });
  source.addEventListener("signed-out", function () { location.reload(); });
  source.onerror = function () {
    // Closed for good (the session ended: 401): the page shows the sign-in form again.
    if (source.readyState === EventSource.CLOSED) { location.reload(); } else { liveEl.textContent = "reconnecting…"; }
  };

  document.getElementById("sign-out").addEventListener("click", function () {
    source.close();
    api("POST", "/admin/console/logout").then(
      function () { location.assign("/admin/console"); },
      function (e) { say("Sign-out failed: " + e.message, true); }
    );
  });

  loadAudit();
  loadReport();
})();
