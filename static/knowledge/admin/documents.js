/* Keeps the documents' titles, status, phase, progress bars, version, embedding model and update time current while work is queued or running.
 * Polls the admin's JSON endpoint (tenant-scoped, like the list) for the listed ids only,
 * and stops once nothing on the page is queued or processing. No build step, no globals. */
(function () {
  "use strict";
  var INTERVAL_MS = 1500;
  var ACTIVE = { queued: true, processing: true };

  function widgets() {
    return Array.prototype.slice.call(document.querySelectorAll(".quarry-progress[data-quarry-doc]"));
  }

  // The label, state and percent come from the server (knowledge.selectors.document_display):
  // one wording for the first render and every update. Progress never moves back on screen.
  function render(el, doc) {
    var shown = doc.display;
    var fill = el.querySelector(".quarry-progress-fill");
    var previous = parseFloat(fill.getAttribute("data-percent") || "0");
    var percent = shown.state === "processing" || shown.state === "queued" ? Math.max(previous, shown.percent) : shown.percent;
    el.setAttribute("data-status", doc.status);
    el.setAttribute("data-state", shown.state);
    el.title = doc.error || "";
    el.querySelector(".quarry-progress-label").textContent = shown.label;
    el.querySelector(".quarry-progress-detail").textContent = shown.detail;
    fill.setAttribute("data-percent", String(percent));
    fill.style.width = percent + "%";
    el.querySelector(".quarry-progress-error").textContent = doc.status === "failed" ? doc.error : "";
    var reindex = el.querySelector(".quarry-reindex");
    if (reindex) { reindex.hidden = !shown.reindex_needed; }
    setAll('[data-quarry-label="' + doc.id + '"]', doc.label);
    setAll('[data-quarry-chunks="' + doc.id + '"]', String(doc.chunk_count));
    setAll('[data-quarry-version="' + doc.id + '"]', String(doc.version));
    setAll('[data-quarry-model="' + doc.id + '"]', doc.embedding_model || "\u2014");
    document.querySelectorAll('[data-quarry-model="' + doc.id + '"]').forEach(function (node) { node.title = doc.embedding_model || ""; });
    document.querySelectorAll('[data-quarry-time="' + doc.id + '"]').forEach(function (node) {
      node.textContent = doc.updated.short;
      node.title = doc.updated.full;
      node.setAttribute("datetime", doc.updated.iso);
    });
  }

  function setAll(selector, text) {
    document.querySelectorAll(selector).forEach(function (node) { node.textContent = text; });
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
