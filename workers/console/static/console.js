// The overview's live part: replaced by each "overview" event (server-rendered, escaped HTML), keeping the
// keyboard focus where it was. Without this script every page still works; it just does not refresh.
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live || !window.EventSource) return;
  const events = new EventSource("/events");
  events.addEventListener("overview", function (e) {
    const focused = document.activeElement && document.activeElement.id;
    const open = Array.from(live.querySelectorAll("details[open]")).map(function (d) {
      return d.closest("[data-folder]") && d.closest("[data-folder]").dataset.folder;
    });
    live.innerHTML = e.data;
    live.querySelectorAll("details").forEach(function (d) {
      const folder = d.closest("[data-folder]");
      if (folder && open.indexOf(folder.dataset.folder) >= 0) d.open = true;
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
