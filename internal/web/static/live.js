// pgrelay console: refreshes the overview's live part every second, while
// the page is visible; the server reads the database at most once a second
// for every page open.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) { return; }
  var status = document.getElementById("live-status");
  var url = live.getAttribute("data-live");
  var busy = false;
  function refresh() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        return r.text().then(function (t) {
          live.innerHTML = t;
          status.textContent = r.ok ? "" : "The last refresh failed (HTTP " + r.status + ").";
        });
      })
      .catch(function () { status.textContent = "The console cannot be reached; retrying every second."; })
      .finally(function () { busy = false; });
  }
  setInterval(refresh, 1000);
})();
