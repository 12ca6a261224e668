// Copy buttons for shortened refs: every <code class="ref" data-ref> gets a small "Copy"
// button after it that puts the full value on the clipboard. Loaded as a same-origin file by
// the pages whose policy runs a script (no inline script); refs added later by a page script
// get theirs through window.helixRefs.scan(root).
(function () {
  "use strict";
  function copy(text) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {
      var area = document.createElement("textarea");
      area.value = text; area.setAttribute("readonly", ""); area.style.position = "fixed"; area.style.opacity = "0";
      document.body.appendChild(area); area.select();
      var ok = document.execCommand("copy"); document.body.removeChild(area);
      if (ok) resolve(); else reject(new Error("copy refused"));
    });
  }
  function scan(root) {
    (root || document).querySelectorAll("code.ref[data-ref]").forEach(function (code) {
      if (code.dataset.copyable) return;
      code.dataset.copyable = "yes";
      var b = document.createElement("button");
      b.type = "button"; b.className = "copy-ref"; b.textContent = "Copy";
      b.setAttribute("aria-label", "Copy " + code.dataset.ref);
      b.addEventListener("click", function () {
        copy(code.dataset.ref).then(function () { b.textContent = "Copied"; }, function () { b.textContent = "Not copied"; })
          .then(function () { setTimeout(function () { b.textContent = "Copy"; }, 1500); });
      });
      // The ref and its button stay on one line together.
      var pair = document.createElement("span"); pair.className = "ref-pair";
      code.parentNode.insertBefore(pair, code); pair.appendChild(code); pair.appendChild(b);
    });
  }
  window.helixRefs = { scan: scan };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", function () { scan(); });
  else scan();
})();
