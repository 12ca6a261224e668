"use strict";
(function () {
  var form = document.getElementById("claim-form");
  var input = document.getElementById("claim-handle");
  var error = document.getElementById("claim-error");
  var button = document.getElementById("claim-button");
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    error.textContent = "";
    button.disabled = true;
    fetch("/api/account/room-sources/credential-claims", {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ claim_handle: input.value.trim() })
    }).then(function (res) {
      return res.json().then(function (body) { return { ok: res.ok, body: body }; });
    }).then(function (r) {
      if (!r.ok) {
        error.textContent = (r.body && r.body.error && r.body.error.code) || "claim_failed";
        button.disabled = false;
        return;
      }
      input.value = "";
      form.hidden = true;
      document.getElementById("source-bearer").textContent = r.body.source_bearer;
      document.getElementById("plugin-config").textContent = JSON.stringify(r.body.plugin_config, null, 2);
      document.getElementById("claim-result").hidden = false;
    }).catch(function () {
      error.textContent = "network_error";
      button.disabled = false;
    });
  });
})();
