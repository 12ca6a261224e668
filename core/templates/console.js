// The run page of the console: appends new events to the timeline (polling the events
// twin with after_seq), keeps the statuses and version current, and cancels through the
// run's own cancel with a fresh idempotency key and the version last read. Text is
// always inserted as text, never as HTML. Stops polling once the run has ended.
(function () {
  "use strict";
  var root = document.getElementById("run");
  if (!root) return;
  var runId = root.dataset.runId;
  var BASE = "/api/account/runs/" + encodeURIComponent(runId);
  var state = { seq: Number(root.dataset.lastSeq) || 0, version: Number(root.dataset.version) || 1,
                terminal: root.dataset.terminal === "true", timer: null };
  var labels = {};
  document.querySelectorAll("#event-labels li").forEach(function (li) { labels[li.dataset.kind] = li.textContent; });
  // What a status reads on a run waiting for its person's answer (the server's words).
  var waiting = {};
  document.querySelectorAll("#status-words li").forEach(function (li) { waiting[li.dataset.wire] = li.textContent; });
  function $(id) { return document.getElementById(id); }

  function api(method, path, body, key) {
    var init = { method: method, credentials: "same-origin", headers: { "Accept": "application/json" } };
    if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    if (key) init.headers["Idempotency-Key"] = key;
    return fetch(path, init).then(function (r) { return r.json().then(function (j) { return { status: r.status, body: j }; }); });
  }

  function freshKey() {
    var b = new Uint8Array(16); crypto.getRandomValues(b);
    return "console-cancel-" + Array.prototype.map.call(b, function (x) { return ("0" + x.toString(16)).slice(-2); }).join("");
  }

  // A status badge: its word and the colour that goes with it (account.css); on a run
  // waiting for an answer, the words of #status-words instead of the wire word.
  function badge(id, status, needsAnswer) {
    var word = needsAnswer && waiting[status];
    $(id).textContent = word || status;
    $(id).dataset.status = word ? "needs_answer" : status;
    $(id).dataset.wire = status;
  }

  function showRun(run) {
    state.version = run.version;
    var needsAnswer = run.completion_status === "needs_input";
    badge("lifecycle", run.lifecycle_status, false);
    badge("completion", run.completion_status, needsAnswer);
    badge("authority", run.terminal_authority_status, needsAnswer);
    $("steps").textContent = run.budget.steps_used + " of " + run.budget.max_steps;
    $("version").textContent = run.version;
    state.terminal = run.recommended_next_action === "stop";
    $("cancel").hidden = state.terminal;
  }

  function append(e) {
    var li = document.createElement("li");
    li.className = "event"; li.dataset.seq = e.seq; li.dataset.kind = e.kind;
    li.textContent = "#" + e.seq + " " + (labels[e.kind] || e.kind) + " ";
    // As the server renders a time: relative to the minute, the exact instant (whole
    // seconds) in datetime and title. An event polled in is new: "just now".
    var small = document.createElement("small"), time = document.createElement("time");
    var exact = String(e.created_at).replace(/(\.\d+)?Z$/, "Z");
    time.setAttribute("datetime", exact);
    time.title = exact.replace("T", " ").replace(/:\d\dZ$/, " UTC");
    time.textContent = "just now";
    small.appendChild(time);
    li.appendChild(small);
    $("timeline").appendChild(li);
  }

  function poll() {
    state.timer = null;
    api("GET", BASE + "/events?after_seq=" + state.seq + "&limit=200").then(function (r) {
      if (r.status !== 200) return;
      r.body.events.forEach(append);
      state.seq = r.body.next_after_seq;
      return api("GET", BASE).then(function (run) { if (run.status === 200) showRun(run.body); });
    }).catch(function () { /* a network hiccup: try again on the next tick */ }).then(function () {
      if (!state.terminal) state.timer = setTimeout(poll, 1000);
    });
  }

  $("cancel").addEventListener("click", function () {
    if (!window.confirm("Cancel this run? A cancelled run cannot be resumed.")) return;
    $("cancel").disabled = true;
    $("cancel-status").textContent = "Cancelling…";
    api("POST", BASE + "/cancel", { expected_version: state.version }, freshKey()).then(function (r) {
      $("cancel").disabled = false;
      if (r.status === 200) { $("cancel-status").textContent = "Cancelled."; showRun(r.body); }
      else $("cancel-status").textContent = "Not cancelled: " + (r.body.error ? r.body.error.code : r.status);
      if (!state.timer) poll();
    });
  });

  if (!state.terminal) state.timer = setTimeout(poll, 1000);
})();
