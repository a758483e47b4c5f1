// pgrelay console: refreshes the overview's live part every second, while
// the page is visible; the server reads the database at most once a second
// for every page open. A link that has the keyboard focus keeps it across
// refreshes.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) { return; }
  var status = document.getElementById("live-status");
  var url = live.getAttribute("data-live");
  var busy = false;
  function replace(html) {
    var focused = document.activeElement;
    var href = focused && live.contains(focused) ? focused.getAttribute("href") : null;
    live.innerHTML = html;
    if (href) {
      var again = live.querySelector('a[href="' + CSS.escape(href) + '"]');
      if (again) { again.focus(); }
    }
  }
  function refresh() {
    if (busy || document.hidden) { return; }
    busy = true;
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        return r.text().then(function (t) {
          replace(t);
          status.textContent = r.ok ? "" : "The last refresh failed (HTTP " + r.status + ").";
        });
      })
      .catch(function () { status.textContent = "The console cannot be reached; retrying every second."; })
      .finally(function () { busy = false; });
  }
  setInterval(refresh, 1000);
})();
