/* The search page: a visible loading state while the results page loads. */
(function () {
  "use strict";
  var form = document.getElementById("search-form");
  if (!form) return;
  form.addEventListener("submit", function () {
    if (!form.q.value.trim()) return;
    var button = document.getElementById("search-button");
    button.disabled = true;
    button.textContent = "Searching…";
    document.getElementById("search-status").textContent = "Searching…";
  });
  // Coming back through the browser's history restores a disabled button: re-enable it.
  window.addEventListener("pageshow", function () {
    var button = document.getElementById("search-button");
    button.disabled = false;
    button.textContent = "Search";
  });
})();
