// The Sources list reloads every 3 s while a sync is queued or running, so counts grow live.
// A static file, not an inline script: the admin's Content-Security-Policy allows no inline code.
(function () {
  "use strict";
  var busy = document.querySelector('.source-status[data-status="running"], .source-status[data-status="queued"]');
  var editing = document.querySelector("form#source_form");
  if (busy && !editing) {
    window.setTimeout(function () { window.location.reload(); }, 3000);
  }
})();
