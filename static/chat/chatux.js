/*
 * What readers do with answers in the web chat, beside chat.js: copy (as Markdown), regenerate,
 * flip between versions ("< 2/3 >"), edit and resend a question, thumbs up / down with a comment,
 * the hover/focus preview of a cited passage, the sidebar's conversation search, and code
 * highlighting (static/vendor/highlight, highlight.js).
 *
 * Safety rule, as in chat.js: text from the server (answers, titles, passages, comments) reaches
 * the page only through textContent; the one innerHTML is highlight.js's output inside
 * QuarryMarkdown.render, which escapes the code it does not mark up.
 *
 * chat.js owns the conversation and the socket; it calls QuarryChatUX.init(host) once, with:
 *   host.tenant, host.csrfToken, host.announce(text), host.busy() -> bool,
 *   host.regenerate(answer), host.edit(question, prompt), host.select(turnId), host.openSession(id),
 *   host.sessionId() -> current session id, host.citation(link) -> Promise<{chunk, href} | null>.
 * An answer is chat.js's object ({node, text, turnId, versions, feedback, citations, ...}); a
 * question is {node, text, turnId, versions}.
 */
(function (global) {
  "use strict";

  var host = null;

  function make(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text != null) node.textContent = text;
    return node;
  }

  function button(className, text, label) {
    var b = make("button", className, text);
    b.type = "button";
    if (label) b.setAttribute("aria-label", label);
    return b;
  }

  /* --- code highlighting ------------------------------------------------------------------ */

  // Guessed only among these, and only when the guess is confident: a wrong colour is worse than none.
  var AUTO = ["python", "javascript", "typescript", "bash", "json", "sql", "yaml", "xml", "java", "go", "rust", "css"];
  var ALIASES = { js: "javascript", ts: "typescript", sh: "bash", zsh: "bash", shell: "bash", py: "python", html: "xml", yml: "yaml",
                  "c++": "cpp", text: "plaintext", txt: "plaintext", md: "markdown" };

  function highlight(code, language) {
    var hljs = global.hljs;
    if (!hljs || code.length > 20000) return null;
    var name = ALIASES[language] || language;
    try {
      if (name && hljs.getLanguage(name)) return hljs.highlight(code, { language: name, ignoreIllegals: true }).value;
      if (name) return null;
      var guess = hljs.highlightAuto(code, AUTO);
      return guess.relevance >= 7 ? guess.value : null;
    } catch (e) {
      return null;
    }
  }

  /* --- answers: copy, regenerate, versions, feedback -------------------------------------- */

  function copyText(text) {
    if (navigator.clipboard && navigator.clipboard.writeText) return navigator.clipboard.writeText(text);
    return new Promise(function (resolve, reject) {
      var area = make("textarea");
      area.value = text;
      area.setAttribute("readonly", "");
      area.className = "sr-only";
      document.body.append(area);
      area.select();
      var ok = document.execCommand("copy");
      area.remove();
      if (ok) resolve(); else reject(new Error("copy refused"));
    });
  }

  /* The answer's Markdown, with its [n] markers defined as links to the cited documents. */
  function markdownOf(answer) {
    var text = answer.text.trim();
    var refs = (answer.sourceLinks || []).map(function (s) {
      return "[" + s.n + "]: " + s.href + (s.title ? ' "' + s.title.replace(/"/g, "'") + '"' : "");
    });
    return refs.length ? text + "\n\n" + refs.join("\n") + "\n" : text + "\n";
  }

  function versionSwitch(item, what) {
    var versions = item.versions || [];
    if (versions.length < 2) return null;
    var at = versions.indexOf(item.turnId);
    var nav = make("span", "versions");
    nav.setAttribute("role", "group");
    nav.setAttribute("aria-label", what + " versions");
    var prev = button("small version-prev", "‹", "Previous " + what.toLowerCase() + " version");
    var next = button("small version-next", "›", "Next " + what.toLowerCase() + " version");
    var label = make("span", "version-label", (at + 1) + "/" + versions.length);
    label.setAttribute("aria-live", "polite");
    prev.disabled = at <= 0;
    next.disabled = at >= versions.length - 1;
    prev.addEventListener("click", function () { if (!host.busy()) host.select(versions[at - 1]); });
    next.addEventListener("click", function () { if (!host.busy()) host.select(versions[at + 1]); });
    nav.append(prev, label, next);
    return nav;
  }

  function answerActions(answer) {
    var bar = make("div", "answer-actions");
    var copy = button("small action-copy", "Copy", "Copy this answer as Markdown");
    copy.addEventListener("click", function () {
      copyText(markdownOf(answer)).then(function () {
        copy.textContent = "Copied";
        host.announce("Answer copied as Markdown.");
        setTimeout(function () { copy.textContent = "Copy"; }, 2000);
      }, function () { host.announce("Could not copy: the browser refused the clipboard."); });
    });
    bar.append(copy);
    if (!answer.turnId && !answer.runId) return bar;  // unsaved answers: copy only
    // A chat answer (turnId) gets a new version; an agent's (runId) is researched again, as a new run.
    var again = button("small action-regenerate", "Regenerate", "Answer this question again");
    again.addEventListener("click", function () {
      if (host.busy()) { host.announce("Wait for the answer being written."); return; }
      host.regenerate(answer);
    });
    bar.append(again);
    var versions = answer.turnId ? versionSwitch(answer, "Answer") : null;
    if (versions) bar.append(versions);
    bar.append(feedbackControls(answer));
    return bar;
  }

  function feedbackUrl(answer) {
    if (!answer.turnId) return "/v1/agent/runs/" + encodeURIComponent(answer.runId) + "/feedback";
    return "/v1/chat/sessions/" + encodeURIComponent(host.sessionId()) + "/turns/" + answer.turnId + "/feedback";
  }

  function sendFeedback(answer, method, body) {
    return fetch(feedbackUrl(answer), {
      method: method,
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": host.csrfToken },
      body: body ? JSON.stringify(Object.assign({ tenant: host.tenant }, body)) : JSON.stringify({ tenant: host.tenant }),
    }).then(function (response) {
      if (response.status === 204) return null;
      return response.json().catch(function () { return {}; }).then(function (payload) {
        if (!response.ok) {
          var fields = payload.fields || {};
          var first = Object.keys(fields)[0];
          throw new Error(first ? first + ": " + fields[first].join(" ") : payload.detail || "Feedback failed (" + response.status + ").");
        }
        return payload;
      });
    });
  }

  function feedbackControls(answer) {
    var box = make("span", "feedback");
    var up = button("small feedback-up", "Good", "Good answer");
    var down = button("small feedback-down", "Bad", "Bad answer");
    var form = make("form", "feedback-form");
    form.hidden = true;
    var id = "feedback-comment-" + (answer.turnId || answer.runId);
    var label = make("label", "sr-only", "Comment on this answer (optional)");
    label.htmlFor = id;
    var comment = make("textarea");
    comment.id = id;
    comment.rows = 2;
    comment.maxLength = 2000;
    comment.placeholder = "What was good or wrong? (optional)";
    var save = make("button", "small primary", "Send feedback");
    save.type = "submit";
    var note = make("span", "feedback-note");
    note.setAttribute("role", "status");
    form.append(label, comment, save);

    function show(feedback) {
      answer.feedback = feedback;
      up.setAttribute("aria-pressed", feedback && feedback.rating === "up" ? "true" : "false");
      down.setAttribute("aria-pressed", feedback && feedback.rating === "down" ? "true" : "false");
      if (feedback && !form.hidden) comment.value = feedback.comment || "";
    }

    function rate(rating) {
      if (answer.feedback && answer.feedback.rating === rating) {
        sendFeedback(answer, "DELETE").then(function () {
          show(null);
          form.hidden = true;
          note.textContent = "Feedback withdrawn.";
        }, function (error) { note.textContent = error.message; });
        return;
      }
      sendFeedback(answer, "PUT", { rating: rating, comment: (answer.feedback && answer.feedback.comment) || "" }).then(function (saved) {
        show({ rating: saved.rating, comment: saved.comment });
        form.hidden = false;
        comment.value = saved.comment;
        note.textContent = "Thanks: feedback saved.";
        comment.focus();
      }, function (error) { note.textContent = error.message; });
    }

    up.addEventListener("click", function () { rate("up"); });
    down.addEventListener("click", function () { rate("down"); });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (!answer.feedback) return;
      save.disabled = true;
      sendFeedback(answer, "PUT", { rating: answer.feedback.rating, comment: comment.value }).then(function (saved) {
        show({ rating: saved.rating, comment: saved.comment });
        form.hidden = true;
        note.textContent = "Thanks: comment saved.";
      }, function (error) { note.textContent = error.message; }).then(function () { save.disabled = false; });
    });
    show(answer.feedback || null);
    box.append(up, down, note, form);
    return box;
  }

  /* --- questions: edit and resend, versions ------------------------------------------------- */

  function questionActions(question) {
    var bar = make("div", "question-actions");
    if (!question.turnId) return bar;
    var edit = button("small action-edit", "Edit", "Edit this question and send it again");
    edit.addEventListener("click", function () { beginEdit(question, bar); });
    bar.append(edit);
    var versions = versionSwitch(question, "Question");
    if (versions) bar.append(versions);
    return bar;
  }

  function beginEdit(question, bar) {
    if (question.node.querySelector(".edit-form")) return;
    var form = make("form", "edit-form");
    var id = "edit-" + question.turnId;
    var label = make("label", "sr-only", "Edited question");
    label.htmlFor = id;
    var area = make("textarea");
    area.id = id;
    area.rows = 3;
    area.value = question.text;
    var send = make("button", "small primary", "Send");
    send.type = "submit";
    var cancel = button("small", "Cancel");
    form.append(label, area, send, cancel);
    bar.hidden = true;
    question.node.classList.add("editing");
    question.node.append(form);
    area.focus();
    function close() {
      form.remove();
      bar.hidden = false;
      question.node.classList.remove("editing");
    }
    cancel.addEventListener("click", close);
    form.addEventListener("keydown", function (event) {
      if (event.key === "Escape") { event.preventDefault(); close(); }
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) { event.preventDefault(); form.requestSubmit(); }
    });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (!area.value.trim()) { host.announce("Type a question first."); return; }
      if (host.busy()) { host.announce("Wait for the answer being written."); return; }
      var prompt = area.value;
      close();
      host.edit(question, prompt);
    });
  }

  /* --- the passage preview of a citation marker -------------------------------------------- */

  var preview = null, previewFor = null, hideTimer = null;

  function previewBox() {
    if (!preview) {
      preview = make("div", "cite-preview");
      preview.id = "cite-preview";
      preview.setAttribute("role", "tooltip");
      preview.hidden = true;
      preview.addEventListener("mouseenter", function () { clearTimeout(hideTimer); });
      preview.addEventListener("mouseleave", scheduleHide);
      document.body.append(preview);
    }
    return preview;
  }

  function place(box, link) {
    var r = link.getBoundingClientRect();
    var width = Math.min(380, window.innerWidth - 16);
    box.style.width = width + "px";  // CSSOM, allowed by the page's CSP (no style attribute is written)
    box.style.left = Math.max(8, Math.min(r.left + window.scrollX, window.scrollX + window.innerWidth - width - 8)) + "px";
    box.style.top = (r.bottom + window.scrollY + 6) + "px";
  }

  function showPreview(link) {
    clearTimeout(hideTimer);
    if (previewFor === link && !previewBox().hidden) return;
    previewFor = link;
    var box = previewBox();
    box.replaceChildren(make("p", "cite-preview-text", "Loading the passage…"));
    box.hidden = false;
    place(box, link);
    link.setAttribute("aria-describedby", box.id);
    host.citation(link).then(function (found) {
      if (previewFor !== link) return;
      if (found && found.withheld) {
        box.replaceChildren(make("p", "cite-preview-text", "Source withheld: you can no longer read the document this passage came from."));
        return;
      }
      if (!found || !found.chunk) {
        box.replaceChildren(make("p", "cite-preview-text", "This passage is no longer in the knowledge base."));
        return;
      }
      var title = make("a", "cite-preview-title", "[" + link.dataset.cite + "] " + (found.chunk.title || found.chunk.document_id));
      title.href = found.href;
      title.target = "_blank";
      title.rel = "noopener";
      var flat = String(found.chunk.text || "").replace(/\s+/g, " ").trim();
      var text = make("p", "cite-preview-text", flat.length > 420 ? flat.slice(0, 420).replace(/\s+\S*$/, "") + " …" : flat);
      box.replaceChildren(title, text, make("p", "hint", "Click the marker to see it among the sources; open the title to read the document."));
      place(box, link);
    }, function () {
      if (previewFor === link) box.replaceChildren(make("p", "cite-preview-text", "Could not load this passage."));
    });
  }

  function hidePreview() {
    if (!preview) return;
    preview.hidden = true;
    if (previewFor) previewFor.removeAttribute("aria-describedby");
    previewFor = null;
  }

  function scheduleHide() {
    clearTimeout(hideTimer);
    hideTimer = setTimeout(hidePreview, 250);
  }

  function watchCitations(container) {
    container.addEventListener("mouseover", function (event) {
      var link = event.target.closest && event.target.closest("a.cite");
      if (link) showPreview(link);
    });
    container.addEventListener("mouseout", function (event) {
      if (event.target.closest && event.target.closest("a.cite")) scheduleHide();
    });
    container.addEventListener("focusin", function (event) {
      var link = event.target.closest && event.target.closest("a.cite");
      if (link) showPreview(link); else hidePreview();
    });
    container.addEventListener("focusout", function (event) {
      if (event.target.closest && event.target.closest("a.cite")) scheduleHide();
    });
    document.addEventListener("keydown", function (event) { if (event.key === "Escape") hidePreview(); });
  }

  /* --- conversation search in the sidebar ---------------------------------------------------- */

  function watchSearch(input, list, results) {
    var timer = null, seq = 0;
    function run() {
      var query = input.value.trim();
      var mine = ++seq;
      if (!query) {
        results.hidden = true;
        results.replaceChildren();
        list.hidden = false;
        return;
      }
      var url = "/chat/sessions?tenant=" + encodeURIComponent(host.tenant) + "&q=" + encodeURIComponent(query);
      fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } }).then(function (response) {
        return response.json().then(function (payload) {
          if (!response.ok) throw new Error(payload.detail || "Search failed (" + response.status + ").");
          return payload;
        });
      }).then(function (payload) {
        if (mine !== seq) return;  // a newer search is on its way
        list.hidden = true;
        results.hidden = false;
        results.replaceChildren();
        var found = payload.sessions || [];
        if (!found.length) results.append(make("li", "empty", "No conversation contains “" + query + "”."));
        found.forEach(function (session) {
          var item = make("li", "session-item search-result");
          item.dataset.sessionId = session.session_id;
          var link = make("a", "session-link");
          link.href = "/?session=" + encodeURIComponent(session.session_id);
          link.append(make("span", "session-title", session.title));
          if (session.match) link.append(matchSnippet(session.match, query));
          item.append(link);
          results.append(item);
        });
        host.announce(found.length + " conversation" + (found.length === 1 ? "" : "s") + " found.");
      }, function (error) { if (mine === seq) host.announce(error.message); });
    }
    /* The hit's text with the query's words marked (text nodes only: the snippet is a message's words). */
    function matchSnippet(text, query) {
      var span = make("span", "session-match");
      var needle = query.trim().replace(/\s+/g, " ").toLowerCase();
      var lower = text.toLowerCase(), at = 0, found;
      while (needle && (found = lower.indexOf(needle, at)) !== -1 && lower.length === text.length) {
        span.append(document.createTextNode(text.slice(at, found)), make("mark", null, text.slice(found, found + needle.length)));
        at = found + needle.length;
      }
      span.append(document.createTextNode(text.slice(at)));
      return span;
    }
    input.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(run, 200);
    });
    input.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && input.value) { event.preventDefault(); input.value = ""; run(); }
    });
    results.addEventListener("click", function (event) {
      var link = event.target.closest(".session-link");
      if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
      event.preventDefault();
      host.openSession(link.closest(".search-result").dataset.sessionId);
    });
  }

  function init(options) {
    host = options;
    var messages = document.getElementById("messages");
    if (messages) watchCitations(messages);
    var input = document.getElementById("session-search");
    var list = document.getElementById("session-list");
    var results = document.getElementById("session-results");
    if (input && list && results) watchSearch(input, list, results);
  }

  global.QuarryChatUX = {
    init: init, highlight: highlight, answerActions: answerActions, questionActions: questionActions, markdownOf: markdownOf,
  };
})(window);
