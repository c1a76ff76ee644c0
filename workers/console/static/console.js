// The overview's live part: replaced by each "overview" event (server-rendered, escaped HTML), keeping the
// keyboard focus where it was; the Clients page's Copy buttons, and its doctor's findings loaded from their own page.
// Without this script every page still works; it just does not refresh, a snippet is selected by hand, and the
// findings are a link away.
"use strict";
(function () {
  const findings = document.querySelector("[data-src]");
  if (findings) {
    fetch(findings.dataset.src, { credentials: "same-origin" })
      .then(function (r) { return r.text(); })
      .then(function (text) {
        const found = new DOMParser().parseFromString(text, "text/html").getElementById(findings.id);
        if (found) findings.replaceChildren(...found.childNodes);
      });
  }
  document.querySelectorAll("button[data-copy]").forEach(function (button) {
    button.addEventListener("click", function () {
      const source = document.getElementById(button.dataset.copy);
      const said = button.parentElement.querySelector(".copied");
      const tell = function (text) { if (said) said.textContent = text; };
      if (!source || !navigator.clipboard) {
        tell("select the text to copy it");
        return;
      }
      navigator.clipboard.writeText(source.textContent).then(
        function () { tell("Copied"); },
        function () { tell("the browser refused the clipboard: select the text to copy it"); }
      );
    });
  });
})();
(function () {
  const live = document.getElementById("live");
  if (!live || !window.EventSource) return;
  const events = new EventSource("/events");
  events.addEventListener("overview", function (e) {
    const focused = document.activeElement && document.activeElement.id;
    const key = function (d) {
      const folder = d.closest("[data-folder]");
      return (folder ? folder.dataset.folder : "") + "|" + d.className;
    };
    const open = Array.from(live.querySelectorAll("details[open]")).map(key);
    live.innerHTML = e.data;
    live.querySelectorAll("details").forEach(function (d) {
      if (open.indexOf(key(d)) >= 0) d.open = true;
    });
    if (focused) {
      const again = document.getElementById(focused);
      if (again) again.focus();
    }
    document.body.dataset.live = "1";
  });
  events.addEventListener("signedout", function () {
    events.close();
    window.location.reload();
  });
})();
