// The /chat page: local chats (localStorage), the observer lane (same-origin fetch with the
// session cookie), a progress lane, and the one terminal assistant message appended once
// by its stable id. Text is always inserted as text, never as HTML. Binding changes (attach,
// disconnect) reach the page's other open tabs (BroadcastChannel, else a storage event);
// the claim handle never leaves the tab it was shown in.
(function () {
  "use strict";
  var KEY = "helix.chats.v1";
  var BASE = "/api/agi/agent-run-observer/bindings";
  // The claim handle is shown once: kept in memory for the page's life, never stored.
  var state = { chats: load(), current: null, timer: null, claim: null };
  // Human labels of event kinds, from the page (the server's one table).
  var labels = {};
  document.querySelectorAll("#event-labels li").forEach(function (e) { labels[e.dataset.kind] = e.textContent; });
  var SYNC = "helix.chat-bindings.v1";
  var channel = typeof BroadcastChannel === "function" ? new BroadcastChannel(SYNC) : null;

  // Tells the other tabs that a chat's binding changed: its id, observer ref and status only.
  function announce(c) {
    var event = { chatId: c.id, observer: c.observer || null, status: c.status || null, at: Date.now() };
    if (channel) channel.postMessage(event);
    else try { localStorage.setItem(SYNC, JSON.stringify(event)); } catch (e) { /* storage full or blocked */ }
  }
  // Another tab bound or withdrew a chat: take its binding (the chat itself from storage
  // when this tab has not seen it yet), then restart or stop this tab's polling.
  function adopt(event) {
    if (!event || typeof event.chatId !== "string") return;
    var c = state.chats.find(function (x) { return x.id === event.chatId; });
    if (!c) {
      c = load().find(function (x) { return x.id === event.chatId; });
      if (!c) return;
      state.chats.push(c);
    }
    if (c.observer !== event.observer) { c.seen = 0; c.progress = []; }
    c.observer = event.observer; c.status = event.status;
    if (state.claim && state.claim.chatId === c.id && c.status !== "awaiting_claim") state.claim = null;
    if (state.current === c.id) { render(); poll(); } else render();
  }
  if (channel) channel.onmessage = function (m) { adopt(m.data); };
  else window.addEventListener("storage", function (e) {
    if (e.key === SYNC && e.newValue) try { adopt(JSON.parse(e.newValue)); } catch (err) { /* not ours */ }
  });

  function load() {
    try { return JSON.parse(localStorage.getItem(KEY)) || []; } catch (e) { return []; }
  }
  function save() { localStorage.setItem(KEY, JSON.stringify(state.chats)); }
  function $(id) { return document.getElementById(id); }
  function chat() { return state.chats.find(function (c) { return c.id === state.current; }); }
  function newId() {
    var b = new Uint8Array(8); crypto.getRandomValues(b);
    return "chat-" + Array.prototype.map.call(b, function (x) { return ("0" + x.toString(16)).slice(-2); }).join("");
  }
  function li(text, cls) { var e = document.createElement("li"); e.textContent = text; if (cls) e.className = cls; return e; }

  function render() {
    var list = $("chats"); list.textContent = "";
    state.chats.forEach(function (c) {
      var item = document.createElement("li");
      var b = document.createElement("button"); b.type = "button"; b.textContent = c.title; b.className = "chat-item";
      b.dataset.chatId = c.id;
      b.addEventListener("click", function () { select(c.id); });
      item.appendChild(b); list.appendChild(item);
    });
    var c = chat();
    var msgs = $("messages"); msgs.textContent = "";
    var progress = $("progress"); progress.textContent = "";
    var claim = state.claim && c && state.claim.chatId === c.id && c.status === "awaiting_claim" ? state.claim : null;
    $("claim").hidden = !claim;
    $("claim-handle").textContent = claim ? claim.handle : "";
    // The expiry to the minute, as every page says a time; the exact instant in datetime.
    var expires = claim ? String(claim.expires).replace(/(\.\d+)?Z$/, "Z") : "";
    var minutes = expires ? Math.max(0, Math.floor((Date.parse(expires) - Date.now()) / 60000)) : 0;
    $("claim-expires").textContent = expires ? (minutes ? "in " + minutes + " min" : "just now") : "";
    $("claim-expires").title = expires ? expires.slice(0, 10) + " " + expires.slice(11, 16) + " UTC" : "";
    $("claim-expires").setAttribute("datetime", expires);
    if (!c) { status("none"); return; }
    c.messages.forEach(function (m) {
      var e = li(m.content, "message " + m.role); e.dataset.messageId = m.id; e.dataset.role = m.role; msgs.appendChild(e);
    });
    (c.progress || []).forEach(function (p) {
      var e = li("#" + p.seq + " " + (labels[p.kind] || p.kind), "receipt"); e.dataset.kind = p.kind; progress.appendChild(e);
    });
    var pending = $("pending-questions"); pending.textContent = "";
    (c.questions || []).forEach(function (q) { pending.appendChild(li(q.prompt, "question")); });
    $("pending").hidden = !(c.questions && c.questions.length);
    status(c.status || "none");
    $("disconnect").hidden = !c.observer;
  }

  // The binding's status as a badge (its word, and the colour of its kind: account.css).
  function status(text, kind) { $("binding-status").textContent = text; $("binding-status").dataset.status = kind || text; }

  function select(id) { state.current = id; render(); poll(); }

  $("new-chat").addEventListener("click", function () {
    var c = { id: newId(), title: "Chat " + (state.chats.length + 1), messages: [], progress: [], seen: 0 };
    state.chats.push(c); save(); select(c.id);
  });

  $("composer").addEventListener("submit", function (ev) {
    ev.preventDefault();
    var c = chat(); var text = $("message-input").value.trim();
    if (!c || !text) return;
    c.messages.push({ id: "local-" + Date.now(), role: "user", content: text });
    $("message-input").value = ""; save(); render();
  });

  function api(method, path, body) {
    var init = { method: method, credentials: "same-origin", headers: { "Accept": "application/json" } };
    if (body !== undefined) { init.headers["Content-Type"] = "application/json"; init.body = JSON.stringify(body); }
    return fetch(path, init).then(function (r) { return r.json().then(function (j) { return { status: r.status, body: j }; }); });
  }

  // Characters as the server counts them: Unicode code points (an emoji is one, not two).
  function chars(text) { return Array.from(text).length; }
  // The longest prefix of `text` of at most `max` code points that ends on a grapheme
  // boundary (never inside an emoji or a combined sequence), so the server admits it as is.
  function clip(text, max) {
    if (chars(text) <= max) return text;
    if (typeof Intl === "object" && Intl.Segmenter) {
      var out = "", n = 0;
      for (var s of new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment(text)) {
        var k = chars(s.segment);
        if (n + k > max) break;
        out += s.segment; n += k;
      }
      return out;
    }
    return Array.from(text).slice(0, max).join("");
  }

  $("attach").addEventListener("click", function () {
    var c = chat(); if (!c) return;
    // The bounded recent-chat snapshot: at most 12 messages, 2,000 characters each, 12,000 in all.
    var snapshot = [], total = 0;
    c.messages.slice(-12).reverse().forEach(function (m) {
      var content = clip(m.content, 2000), n = chars(content);
      if (total + n <= 12000) { snapshot.unshift({ role: m.role, content: content }); total += n; }
    });
    api("POST", BASE, { chat_id: c.id, snapshot: snapshot }).then(function (r) {
      if (r.status !== 201) { status("error: " + r.body.error.code, "error"); return; }
      c.observer = r.body.observer_binding_ref; c.status = "awaiting_claim"; c.seen = 0; c.progress = [];
      state.claim = { chatId: c.id, handle: r.body.claim_handle, expires: r.body.expires_at };
      save(); render(); announce(c);
      poll();
    });
  });

  $("disconnect").addEventListener("click", function () {
    var c = chat(); if (!c || !c.observer) return;
    api("DELETE", BASE + "/" + c.observer).then(function (r) {
      if (r.status === 200) { c.status = "disconnected"; c.observer = null; save(); render(); announce(c); }
    });
  });

  function poll() {
    if (state.timer) { clearTimeout(state.timer); state.timer = null; }
    var c = chat(); if (!c || !c.observer) return;
    var ref = c.observer;
    api("GET", BASE + "/" + ref + "/events?after_seq=" + (c.seen || 0) + "&limit=50").then(function (r) {
      if (r.status === 200) {
        r.body.receipts.forEach(function (p) { c.progress.push({ seq: p.seq, kind: p.kind }); });
        c.seen = r.body.next_after_seq;
      }
      return api("GET", BASE + "/" + ref);
    }).then(function (r) {
      if (r.status === 200) {
        c.status = r.body.binding_status;
        c.questions = r.body.pending_questions || [];
        var m = r.body.terminal_message;
        // Exactly once: the message's stable id is the de-duplication key across reloads.
        if (m && !c.messages.some(function (x) { return x.id === m.id; })) {
          c.messages.push({ id: m.id, role: "assistant", content: m.content });
        }
      }
      save(); if (state.current === c.id) render();
    }).finally(function () {
      if (state.current === c.id && c.observer && c.status !== "disconnected") state.timer = setTimeout(poll, 1000);
    });
  }

  if (state.chats.length) select(state.chats[state.chats.length - 1].id); else render();
})();
