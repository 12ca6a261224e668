"use strict";
/* The Helix run view of an MCP Apps host (SEP-1865): the view side of the postMessage
   JSON-RPC protocol, by hand. ui/initialize, then ui/notifications/initialized; the host
   then sends ui/notifications/tool-input and ui/notifications/tool-result. When the host
   proxies server tools (hostCapabilities.serverTools), a run result is completed with the
   run's events and evidence bundle through tools/call. Renders with textContent only. */
(function () {
  var RUN = "helix.agent_run.v1";
  var EVENTS = "helix.agent_run.event_page.v1";
  var BUNDLE = "helix.agent_run.evidence_bundle.v1";
  var nextId = 1;
  var waiting = {};
  var host = { capabilities: {}, context: {} };
  var state = { run: null, events: {}, bundle: null, fetchedFor: null };

  function send(message) { window.parent.postMessage(message, "*"); }
  function request(method, params) {
    var id = nextId++;
    send({ jsonrpc: "2.0", id: id, method: method, params: params });
    return new Promise(function (resolve, reject) { waiting[id] = { resolve: resolve, reject: reject }; });
  }
  function notify(method, params) { send({ jsonrpc: "2.0", method: method, params: params }); }
  function answer(id, result) { send({ jsonrpc: "2.0", id: id, result: result }); }

  function $(id) { return document.getElementById(id); }
  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }
  function short(hash) { return hash ? String(hash).slice(0, 16) + "\u2026" : ""; }

  function structured(result) {
    if (result && result.structuredContent && typeof result.structuredContent === "object") return result.structuredContent;
    var blocks = (result && result.content) || [];
    for (var i = 0; i < blocks.length; i++) {
      if (blocks[i].type === "text") {
        try { return JSON.parse(blocks[i].text); } catch (e) { return null; }
      }
    }
    return null;
  }

  function onResult(result) {
    var data = structured(result);
    if (!data) return;
    if (result.isError || data.error) {
      var err = data.error || {};
      showError((err.code || "error") + ": " + (err.message || "the tool refused"));
      return;
    }
    showError(null);
    if (data.schema === RUN) {
      state.run = data;
      if (state.bundle && state.bundle.run_id !== data.run_id) state.bundle = null;
      fetchDetail(data);
    } else if (data.schema === EVENTS) {
      data.events.forEach(function (e) { state.events[e.seq] = e; });
    } else if (data.schema === BUNDLE) {
      state.bundle = data;
    }
    render();
  }

  /* With a host that proxies server tools, the run's timeline and evidence come from the
     server's own read tools (once per run version). */
  function fetchDetail(run) {
    if (!host.capabilities.serverTools) return;
    var key = run.run_id + "@" + run.version;
    if (state.fetchedFor === key) return;
    state.fetchedFor = key;
    var call = function (name, args) {
      return request("tools/call", { name: name, arguments: args }).then(onResult, function (e) {
        showError("the host could not call " + name + ": " + ((e && e.message) || e));
      });
    };
    call("helix_run_list_events", { run_id: run.run_id, after_seq: 0, limit: 200 });
    call("helix_run_fetch_evidence", { run_id: run.run_id });
  }

  function showError(text) {
    var node = $("error");
    node.hidden = !text;
    node.textContent = text || "";
  }

  function render() {
    var run = state.run;
    if (!run) return;
    $("view").setAttribute("data-state", "run");
    $("view").setAttribute("data-run-id", run.run_id);
    $("objective").textContent = run.objective;
    $("run-ref").textContent = run.run_id + " \u00b7 version " + run.version;

    var statuses = $("statuses");
    clear(statuses);
    [["Lifecycle", "lifecycle_status"], ["Completion", "completion_status"],
     ["Terminal authority", "terminal_authority_status"], ["Next action", "recommended_next_action"]]
      .forEach(function (row) {
        statuses.appendChild(el("dt", row[0]));
        var dd = el("dd", run[row[1]]);
        dd.id = row[1];
        statuses.appendChild(dd);
      });

    var b = run.budget;
    $("budget").textContent = b.steps_used + " of " + b.max_steps + " steps used, " + b.steps_remaining +
      " remaining; expires " + b.expires_at;
    $("budget-meter").max = Math.max(1, b.max_steps);
    $("budget-meter").value = b.steps_used;

    var questions = $("questions");
    clear(questions);
    run.pending_questions.forEach(function (q) {
      var li = el("li", q.prompt, "question");
      li.setAttribute("data-question-id", q.question_id);
      li.appendChild(el("span", " (" + q.question_id + ")", "prov"));
      questions.appendChild(li);
    });
    $("no-questions").hidden = run.pending_questions.length > 0;

    renderTimeline(run);
    renderEvidence(run);
    renderTerminal(run);
  }

  function renderTimeline(run) {
    var timeline = $("timeline");
    clear(timeline);
    var seqs = Object.keys(state.events).map(Number).sort(function (a, b) { return a - b; });
    if (seqs.length) {
      seqs.forEach(function (seq) {
        var e = state.events[seq];
        if (e.run_id !== run.run_id) return;
        var li = el("li", null, "event");
        li.setAttribute("data-seq", seq);
        li.appendChild(el("span", "#" + seq + " " + e.kind, "label"));
        li.appendChild(el("span", " \u00b7 v" + e.version + " \u00b7 " + e.created_at, "prov"));
        var detail = JSON.stringify(e.data);
        if (detail && detail !== "{}") li.appendChild(el("div", detail, "mono prov"));
        timeline.appendChild(li);
      });
      return;
    }
    /* Without the event log: what the run itself records. */
    timeline.appendChild(el("li", "created " + run.created_at, "event"));
    if (run.latest_result) {
      var r = run.latest_result;
      timeline.appendChild(el("li", "step " + r.step + ": " + r.solver_status + " \u2014 " + r.summary, "event"));
    }
    if (run.completed_at) timeline.appendChild(el("li", "completed " + run.completed_at, "event"));
    if (run.cancelled_at) timeline.appendChild(el("li", "cancelled " + run.cancelled_at, "event"));
  }

  function renderEvidence(run) {
    var list = $("evidence");
    clear(list);
    var bundle = state.bundle && state.bundle.run_id === run.run_id ? state.bundle : null;
    if (bundle && bundle.evidence.length) {
      bundle.evidence.forEach(function (item) {
        var li = el("li", null, "evidence");
        li.setAttribute("data-ref", item.ref);
        li.appendChild(el("div", item.ref, "mono"));
        li.appendChild(el("div", "source " + item.source + " \u00b7 family " + item.family + " \u00b7 step " +
          item.step + " \u00b7 sha256 " + short(item.content_sha256), "prov provenance"));
        li.appendChild(el("blockquote", item.excerpt, "excerpt"));
        list.appendChild(li);
      });
    } else {
      run.evidence.evidence_refs.forEach(function (ref) {
        var li = el("li", null, "evidence");
        li.setAttribute("data-ref", ref);
        li.appendChild(el("div", ref, "mono"));
        li.appendChild(el("div", "evidence ref (fetch the bundle for its source and excerpt)", "prov"));
        list.appendChild(li);
      });
    }
    $("no-evidence").hidden = list.childNodes.length > 0;
  }

  function renderTerminal(run) {
    var box = $("terminal");
    clear(box);
    var product = run.latest_result && run.latest_result.terminal_product;
    if (!product) {
      box.appendChild(el("p", "No terminal product yet.", "muted"));
      return;
    }
    var verified = run.terminal_authority_status === "authorized";
    var wrap = el("div", null, "product");
    wrap.id = "terminal-product";
    wrap.appendChild(el("p", (verified ? "Verified terminal product" : "Unverified terminal candidate") +
      " (terminal authority: " + run.terminal_authority_status + "): an observation, not an answer authority.",
      "label flag"));
    wrap.appendChild(el("p", product.text));
    wrap.appendChild(el("p", "sha256 " + short(product.text_sha256) + " \u00b7 supported by " +
      product.supporting_evidence_refs.join(", "), "prov mono"));
    box.appendChild(wrap);
  }

  function applyContext(context) {
    for (var k in context) host.context[k] = context[k];
    var vars = host.context.styles && host.context.styles.variables;
    if (vars) {
      Object.keys(vars).forEach(function (name) {
        if (name.indexOf("--") === 0 && vars[name]) document.documentElement.style.setProperty(name, vars[name]);
      });
    }
    if (host.context.theme) document.documentElement.setAttribute("data-theme", host.context.theme);
    var modes = host.context.availableDisplayModes || [];
    var button = $("fullscreen");
    var current = host.context.displayMode || "inline";
    button.hidden = modes.indexOf("fullscreen") < 0 && current !== "fullscreen";
    button.textContent = current === "fullscreen" ? "Inline" : "Fullscreen";
  }

  $("fullscreen").addEventListener("click", function () {
    var mode = host.context.displayMode === "fullscreen" ? "inline" : "fullscreen";
    request("ui/request-display-mode", { mode: mode }).then(function (r) {
      applyContext({ displayMode: (r && r.mode) || host.context.displayMode });
    }, function () {});
  });

  var lastSize = "";
  var initialized = false;
  function reportSize() {
    if (!initialized) return;
    var w = document.documentElement.scrollWidth, h = document.documentElement.scrollHeight;
    if (w + "x" + h === lastSize) return;
    lastSize = w + "x" + h;
    notify("ui/notifications/size-changed", { width: w, height: h });
  }

  window.addEventListener("message", function (event) {
    if (event.source !== window.parent) return;
    var msg = event.data;
    if (!msg || msg.jsonrpc !== "2.0") return;
    if (msg.method === undefined) {
      var w = waiting[msg.id];
      if (!w) return;
      delete waiting[msg.id];
      if (msg.error) w.reject(msg.error); else w.resolve(msg.result);
      return;
    }
    var p = msg.params || {};
    switch (msg.method) {
      case "ui/notifications/tool-input":
        if (!state.run && p.arguments) $("run-ref").textContent = "tool input received; waiting for the result";
        break;
      case "ui/notifications/tool-result": onResult(p); break;
      case "ui/notifications/tool-cancelled": showError("the tool call was cancelled: " + (p.reason || "")); break;
      case "ui/notifications/host-context-changed": applyContext(p); break;
      case "ui/resource-teardown": answer(msg.id, {}); break;
      case "ping": answer(msg.id, {}); break;
      default:
        if (msg.id !== undefined) send({ jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: "Method not found" } });
    }
    reportSize();
  });

  request("ui/initialize", {
    protocolVersion: "2026-01-26",
    appInfo: { name: "helix-run-view", version: "1" },
    appCapabilities: { availableDisplayModes: ["inline", "fullscreen"] }
  }).then(function (result) {
    host.capabilities = (result && result.hostCapabilities) || {};
    applyContext((result && result.hostContext) || {});
    notify("ui/notifications/initialized", {});
    initialized = true;
    reportSize();
  }, function (e) { showError("ui/initialize failed: " + ((e && e.message) || e)); });
  if (window.ResizeObserver) new ResizeObserver(reportSize).observe(document.documentElement);
})();
