/* Keeps the documents' status and progress bars current while work is queued or running.
 * Polls the admin's JSON endpoint (tenant-scoped, like the list) for the listed ids only,
 * and stops once nothing on the page is queued or processing. No build step, no globals. */
(function () {
  "use strict";
  var INTERVAL_MS = 1500;
  var ACTIVE = { queued: true, processing: true };

  function widgets() {
    return Array.prototype.slice.call(document.querySelectorAll(".quarry-progress[data-quarry-doc]"));
  }

  function render(el, doc) {
    var percent = Math.round(doc.progress * 100);
    var label = doc.status === "processing"
      ? (doc.cancel_requested ? "Cancelling\u2026" : "Processing " + percent + "%")
      : doc.status_label;
    el.setAttribute("data-status", doc.status);
    el.title = doc.error || "";
    el.querySelector(".quarry-progress-label").textContent = label;
    el.querySelector(".quarry-progress-fill").style.width = (doc.status === "failed" ? 0 : percent) + "%";
    el.querySelector(".quarry-progress-error").textContent = doc.status === "failed" ? doc.error : "";
    document.querySelectorAll('[data-quarry-chunks="' + doc.id + '"]').forEach(function (link) {
      link.textContent = doc.chunk_count;
    });
  }

  function poll() {
    var active = widgets().filter(function (el) { return ACTIVE[el.getAttribute("data-status")]; });
    if (!active.length) {
      return;
    }
    if (document.hidden) {
      window.setTimeout(poll, INTERVAL_MS);
      return;
    }
    var ids = active.map(function (el) { return el.getAttribute("data-quarry-doc"); });
    var url = active[0].getAttribute("data-url") + "?ids=" + encodeURIComponent(ids.join(","));
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.json();
      })
      .then(function (data) {
        var byId = {};
        data.documents.forEach(function (doc) { byId[String(doc.id)] = doc; });
        active.forEach(function (el) {
          var doc = byId[el.getAttribute("data-quarry-doc")];
          if (doc) { render(el, doc); }
        });
        window.setTimeout(poll, INTERVAL_MS);
      })
      .catch(function () {
        window.setTimeout(poll, INTERVAL_MS * 4);  // the server is busy or restarting: back off
      });
  }

  // The bars' initial widths come as data-percent: the Content-Security-Policy allows no inline style attribute.
  function paintInitial() {
    document.querySelectorAll(".quarry-progress-fill[data-percent]").forEach(function (fill) {
      fill.style.width = fill.getAttribute("data-percent") + "%";
    });
  }

  document.addEventListener("DOMContentLoaded", function () { paintInitial(); window.setTimeout(poll, INTERVAL_MS); });
})();
