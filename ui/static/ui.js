// corotask web UI: live updates and a check of the JSON typed in forms.
"use strict";

// Live updates: the server sends the page's live part (#live) again,
// through server-sent events, whenever it changes.
(function () {
  const main = document.querySelector("main[data-live]");
  const live = document.getElementById("live");
  const badge = document.getElementById("live-state");
  if (!main || !live || !window.EventSource) return;
  const source = new EventSource(main.dataset.live);
  source.addEventListener("update", (e) => {
    live.innerHTML = e.data;
    if (badge) { badge.textContent = "live"; badge.className = "badge live"; }
    document.dispatchEvent(new CustomEvent("corotask:updated"));
  });
  source.addEventListener("error", (e) => {
    if (!badge) return;
    if (e.data) { badge.textContent = e.data; badge.className = "badge stale"; return; }
    badge.textContent = "reconnecting";
    badge.className = "badge stale";
  });
  source.addEventListener("open", () => {
    if (badge) { badge.textContent = "live"; badge.className = "badge live"; }
  });
})();

// JSON check: a form with data-json="FIELD" says as you type whether FIELD
// holds valid JSON. The server checks it again.
document.querySelectorAll("form[data-json]").forEach((form) => {
  const field = form.elements[form.dataset.json];
  const hint = form.querySelector(".hint");
  const button = form.querySelector("button[type=submit]");
  const check = () => {
    const text = field.value.trim();
    if (text === "") { hint.textContent = ""; button.disabled = false; return; }
    try {
      JSON.parse(text);
      hint.textContent = "valid JSON";
      hint.className = "hint ok";
      button.disabled = false;
    } catch (err) {
      hint.textContent = "not valid JSON: " + err.message;
      hint.className = "hint bad";
      button.disabled = true;
    }
  };
  field.addEventListener("input", check);
  check();
});
