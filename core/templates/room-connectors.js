"use strict";
(function () {
  function post(path, body) {
    return fetch(path, {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body)
    }).then(function (res) {
      return res.json().then(function (b) { return { ok: res.ok, body: b }; });
    });
  }
  function code(r) {
    return (r.body && r.body.error && r.body.error.code) || "request_failed";
  }
  var form = document.getElementById("pair-form");
  var error = document.getElementById("pair-error");
  var button = document.getElementById("pair-button");
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    error.textContent = "";
    button.disabled = true;
    post("/api/account/room-connectors/pairings", {
      room_id: document.getElementById("pair-room").value.trim(),
      world_id: document.getElementById("pair-world").value.trim()
    }).then(function (r) {
      if (!r.ok) {
        error.textContent = code(r);
        button.disabled = false;
        return;
      }
      form.hidden = true;
      document.getElementById("connector-credential").textContent = r.body.connector_credential;
      document.getElementById("connector-config").textContent = JSON.stringify(r.body.connector_config, null, 2);
      document.getElementById("pair-result").hidden = false;
    }).catch(function () {
      error.textContent = "network_error";
      button.disabled = false;
    });
  });
  var clear = document.getElementById("clear-form");
  clear.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var status = document.getElementById("clear-status");
    post("/api/account/room-connectors/emergency-stop/clear", {
      room_id: document.getElementById("clear-room").value.trim(),
      environment_binding_id: document.getElementById("clear-binding").value.trim()
    }).then(function (r) {
      status.textContent = r.ok ? "Emergency Stop cleared." : code(r);
    }).catch(function () {
      status.textContent = "network_error";
    });
  });
})();
