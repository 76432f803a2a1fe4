/*
 * Files attached to a conversation (chat/api/files.py): the paperclip, drag and drop onto the
 * conversation, each file's progress (uploading, then the workers' extracting / embedding /
 * indexing, as editors see it in the admin) and its failure reason, and removal.
 *
 * Works beside chat.js through window.QuarryChat (the current session, starting one) and the
 * "quarry:session" event. Attaching never blocks the chat: uploads and polling run on their own.
 *
 * Safety rule, as in chat.js: text from the server (file names, errors, passages) reaches the
 * page only through textContent.
 */
(function () {
  "use strict";

  var chat = window.QuarryChat;
  var button = document.getElementById("attach");
  var input = document.getElementById("attach-input");
  var list = document.getElementById("attached-files");
  var dropZone = document.querySelector(".conversation");
  if (!chat || !button || !input || !list) return;

  var POLL_MS = 1000;
  var state = {
    sessionId: chat.sessionId(),
    files: [],          // the server's list for the current session
    uploads: [],        // {name, size, loaded, error} not yet accepted by the server
    names: {},          // file_id -> name, for citations (kept across refreshes)
    limits: null,       // {max_files, max_bytes, max_chunks} per conversation, from the server's list
    pollTimer: null,
    generation: 0,      // bumped on every session change: late answers for another session are dropped
  };

  function make(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text != null) node.textContent = text;
    return node;
  }

  function filesUrl(sessionId, rest) {
    return "/v1/chat/sessions/" + encodeURIComponent(sessionId) + "/files" + (rest || "") +
      "?tenant=" + encodeURIComponent(chat.tenant);
  }

  function api(method, url, body) {
    var headers = { "Accept": "application/json", "X-CSRFToken": chat.csrfToken };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    return fetch(url, {
      method: method, credentials: "same-origin", headers: headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then(function (response) {
      if (response.status === 204) return null;
      return response.json().catch(function () { return {}; }).then(function (payload) {
        if (!response.ok) throw new Error(payload.detail || ("HTTP " + response.status));
        return payload;
      });
    });
  }

  function formatBytes(n) {
    if (n >= 1024 * 1024) return (n / 1024 / 1024).toFixed(1) + " MB";
    if (n >= 1024) return Math.round(n / 1024) + " KB";
    return n + " bytes";
  }

  /* What a file is doing, in the words of the editors' document list. */
  function describe(file) {
    if (file.status === "ready") return "Ready · " + file.chunk_count + (file.chunk_count === 1 ? " passage" : " passages");
    if (file.status === "failed") return "Failed: " + (file.error || "it could not be processed");
    if (file.status === "queued") return "Queued…";
    if (file.phase === "embedding" && file.phase_total) return "Embedding " + file.phase_done + " of " + file.phase_total + "…";
    if (file.phase === "indexing") return "Indexing…";
    return "Extracting…";
  }

  function render() {
    list.replaceChildren();
    state.files.forEach(function (file) {
      var item = make("li", "attached-file attached-" + file.status);
      item.dataset.fileId = file.file_id;
      item.append(make("span", "attached-name", file.name || file.title || file.file_id));
      item.append(make("span", "attached-size", formatBytes(file.size)));
      var status = make("span", "attached-status", describe(file));
      item.append(status);
      if (file.status === "queued" || file.status === "processing") {
        var bar = make("progress", "attached-progress");
        bar.max = 1;
        bar.value = file.progress || 0;
        bar.setAttribute("aria-label", "Progress of " + (file.name || file.file_id));
        item.append(bar);
      }
      var remove = make("button", "small attached-remove", "Remove");
      remove.type = "button";
      remove.setAttribute("aria-label", "Remove " + (file.name || file.file_id));
      remove.addEventListener("click", function () { removeFile(file); });
      item.append(remove);
      list.append(item);
    });
    state.uploads.forEach(function (upload) {
      var item = make("li", "attached-file " + (upload.error ? "attached-failed" : "attached-uploading"));
      item.append(make("span", "attached-name", upload.name));
      item.append(make("span", "attached-size", formatBytes(upload.size)));
      item.append(make("span", "attached-status", upload.error ? "Not attached: " + upload.error : "Uploading…"));
      if (!upload.error) {
        var bar = make("progress", "attached-progress");
        bar.max = upload.size || 1;
        bar.value = upload.loaded;
        bar.setAttribute("aria-label", "Upload of " + upload.name);
        item.append(bar);
      } else {
        var dismiss = make("button", "small attached-remove", "Dismiss");
        dismiss.type = "button";
        dismiss.addEventListener("click", function () {
          state.uploads = state.uploads.filter(function (u) { return u !== upload; });
          render();
        });
        item.append(dismiss);
      }
      list.append(item);
    });
    list.hidden = !state.files.length && !state.uploads.length;
  }

  /* --- the server's list, polled while anything is still being processed ------------------- */

  function refresh() {
    var sessionId = state.sessionId;
    var generation = state.generation;
    clearTimeout(state.pollTimer);
    if (!sessionId) { state.files = []; render(); return Promise.resolve(); }
    return api("GET", filesUrl(sessionId)).then(function (payload) {
      if (generation !== state.generation) return;
      var before = {};
      state.files.forEach(function (f) { before[f.file_id] = f.status; });
      state.files = payload.files || [];
      state.limits = payload.limits || state.limits;
      state.files.forEach(function (f) {
        state.names[f.file_id] = f.name || f.title || f.file_id;
        // A failure is said in the conversation too, once, when it happens.
        if (f.status === "failed" && before[f.file_id] && before[f.file_id] !== "failed") {
          chat.notice((f.name || f.file_id) + " could not be attached: " + f.error);
        }
      });
      render();
      var busy = state.files.some(function (f) { return f.status === "queued" || f.status === "processing"; });
      if (busy) state.pollTimer = setTimeout(refresh, POLL_MS);
    }, function () {
      // A session that is not (or no longer) a chat session of ours has no files to show.
      if (generation !== state.generation) return;
      state.files = [];
      render();
    });
  }

  /* --- attaching ---------------------------------------------------------------------------- */

  function ensureSession() {
    if (state.sessionId) return Promise.resolve(state.sessionId);
    return api("POST", "/v1/chat/sessions", { tenant: chat.tenant }).then(function (payload) {
      chat.adoptNewSession(payload.session_id);  // fires quarry:session, which sets state.sessionId
      return payload.session_id;
    });
  }

  function attach(fileList) {
    var files = Array.prototype.slice.call(fileList || []);
    if (!files.length) return;
    if (chat.mode() === "agent") {
      chat.notice("Files can be attached in Chat mode: switch to Chat to attach them.");
      return;
    }
    ensureSession().then(function (sessionId) {
      return refresh().then(function () {  // the bounds and what the conversation holds already
        var count = state.files.length;
        var bytes = state.files.reduce(function (sum, f) { return sum + f.size; }, 0);
        files.forEach(function (file) {
          var refusal = overBound(count, bytes, file);
          if (refusal) { refuse(file, refusal); return; }
          count += 1;
          bytes += file.size;
          upload(sessionId, file);
        });
      });
    }, function (error) {
      chat.notice("Could not start a conversation for the files: " + error.message);
    });
  }

  /* The server's bounds, checked before a byte is sent (the server checks them again). */
  function overBound(count, bytes, file) {
    var limits = state.limits;
    if (!limits) return "";
    if (count + 1 > limits.max_files) {
      return "a conversation holds at most " + limits.max_files + " files (QUARRY_CHAT_FILES_MAX_FILES). Remove a file first.";
    }
    if (bytes + file.size > limits.max_bytes) {
      return "a conversation's files hold at most " + formatBytes(limits.max_bytes) + " (QUARRY_CHAT_FILES_MAX_BYTES); this one has " +
        formatBytes(bytes) + " and " + file.name + " is " + formatBytes(file.size) + ". Nothing was uploaded.";
    }
    return "";
  }

  function refuse(file, reason) {
    var entry = { name: file.name, size: file.size, loaded: 0, error: "" };
    state.uploads.push(entry);
    fail(entry, reason);
  }

  /* One request per file, so each has its own progress and its own refusal. */
  function upload(sessionId, file) {
    var entry = { name: file.name, size: file.size, loaded: 0, error: "" };
    state.uploads.push(entry);
    render();
    var form = new FormData();
    form.append("files", file, file.name);
    var request = new XMLHttpRequest();
    request.open("POST", filesUrl(sessionId));
    request.setRequestHeader("X-CSRFToken", chat.csrfToken);
    request.setRequestHeader("Accept", "application/json");
    request.upload.addEventListener("progress", function (event) {
      entry.loaded = event.loaded;
      var bar = list.querySelectorAll(".attached-uploading progress")[state.uploads.indexOf(entry)];
      if (bar) bar.value = event.loaded;
    });
    request.addEventListener("load", function () {
      var payload = {};
      try { payload = JSON.parse(request.responseText || "{}"); } catch (e) { payload = {}; }
      if (request.status === 202) {
        state.uploads = state.uploads.filter(function (u) { return u !== entry; });
        if (sessionId === state.sessionId) refresh(); else render();
      } else {
        fail(entry, payload.detail || ("the server answered " + request.status));
      }
    });
    request.addEventListener("error", function () { fail(entry, "the upload was interrupted"); });
    request.send(form);
  }

  function fail(entry, reason) {
    entry.error = reason;
    render();
    chat.notice(entry.name + " could not be attached: " + reason);
  }

  function removeFile(file) {
    var sessionId = state.sessionId;
    api("DELETE", filesUrl(sessionId, "/" + encodeURIComponent(file.file_id))).then(refresh, function (error) {
      chat.notice("Could not remove " + (file.name || file.file_id) + ": " + error.message);
      refresh();
    });
  }

  button.addEventListener("click", function () { input.click(); });
  input.addEventListener("change", function () {
    attach(input.files);
    input.value = "";
  });

  if (dropZone) {
    var depth = 0;
    var carriesFiles = function (event) {
      return event.dataTransfer && Array.prototype.indexOf.call(event.dataTransfer.types || [], "Files") >= 0;
    };
    dropZone.addEventListener("dragenter", function (event) {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      depth += 1;
      dropZone.classList.add("drop-target");
    });
    dropZone.addEventListener("dragover", function (event) {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      event.dataTransfer.dropEffect = "copy";
    });
    dropZone.addEventListener("dragleave", function () {
      depth = Math.max(0, depth - 1);
      if (!depth) dropZone.classList.remove("drop-target");
    });
    dropZone.addEventListener("drop", function (event) {
      if (!carriesFiles(event)) return;
      event.preventDefault();
      depth = 0;
      dropZone.classList.remove("drop-target");
      attach(event.dataTransfer.files);
    });
  }

  document.addEventListener("quarry:session", function (event) {
    var sessionId = event.detail ? event.detail.sessionId : null;
    if (sessionId === state.sessionId) return;
    state.sessionId = sessionId;
    state.generation += 1;
    state.files = [];
    state.uploads = state.uploads.filter(function (u) { return !u.error; });
    refresh();
  });

  /* What chat.js asks when it shows a citation of an attached file. */
  window.QuarryChatFiles = {
    label: function (fileId) { return (state.names[fileId] || fileId) + " (attached)"; },
    owns: function (chunkId) {
      var fileId = String(chunkId).replace(/:\d+$/, "");
      return state.files.some(function (f) { return f.file_id === fileId; }) || fileId in state.names;
    },
    passages: function (chunkIds) {
      if (!state.sessionId) return Promise.resolve([]);
      return api("POST", filesUrl(state.sessionId, "/passages"), { ids: chunkIds }).then(function (payload) {
        return (payload.chunks || []).map(function (chunk) {
          return { chunk_id: chunk.chunk_id, document_id: chunk.file_id, text: chunk.text,
                   title: (state.names[chunk.file_id] || chunk.title || chunk.file_id) + " (attached)" };
        });
      });
    },
  };

  refresh();
})();
