/*
 * The chat page: one WebSocket to /ws/chat/ (protocol in chat/consumers.py), the
 * conversation, the sources panel and the session list.
 *
 * Safety rule for this file: text from the server (questions, answers, titles, passages)
 * reaches the page only through textContent, or through QuarryMarkdown.render, which
 * escapes everything first. No other innerHTML takes outside text.
 */
(function () {
  "use strict";

  var body = document.body;
  var config = {
    tenant: body.dataset.tenant,
    wsPath: body.dataset.wsPath || "/ws/chat/",
    maxPrompt: Number(body.dataset.maxPrompt || 16384),
  };
  var csrfToken = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";

  var el = {
    messages: document.getElementById("messages"),
    greeting: document.getElementById("greeting"),
    form: document.getElementById("composer"),
    prompt: document.getElementById("prompt"),
    send: document.getElementById("send"),
    stop: document.getElementById("stop"),
    status: document.getElementById("status"),
    connection: document.getElementById("connection"),
    banner: document.getElementById("banner"),
    title: document.getElementById("conversation-title"),
    modeHint: document.getElementById("mode-hint"),
    sessionList: document.getElementById("session-list"),
    sessionsPanel: document.getElementById("sessions-panel"),
    sessionsToggle: document.getElementById("sessions-toggle"),
    newChat: document.getElementById("new-chat"),
    sources: document.getElementById("source-list"),
    sourcesHint: document.getElementById("sources-hint"),
    sourcesHeading: document.getElementById("sources-heading"),
    alsoRetrieved: document.getElementById("also-retrieved"),
    alsoList: document.getElementById("also-retrieved-list"),
  };

  var state = {
    socket: null,
    connected: false,
    signedOut: false,
    retries: 0,
    reconnectTimer: null,
    sessionId: null,
    sessionKind: null,
    pending: null,       // the answer being written: {requestId, prompt, mode, node, text, citations, ...}
    answers: [],         // every answer on screen, for the sources panel
    shownAnswer: null,
    chunkCache: {},      // chunk_id -> chunk (or null: no longer in the knowledge base)
    requestSeq: 0,
    untitled: null,      // a session started by attaching files, not yet named by a question
  };

  /* --- small helpers ------------------------------------------------------------------ */

  function make(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text != null) node.textContent = text;
    return node;
  }

  function announce(text) { el.status.textContent = text; }

  function currentMode() {
    var checked = el.form.querySelector('input[name="mode"]:checked');
    return checked ? checked.value : "chat";
  }

  function setMode(kind) {
    var radio = el.form.querySelector('input[name="mode"][value="' + (kind === "agent" ? "agent" : "chat") + '"]');
    if (radio) radio.checked = true;
    updateModeHint();
  }

  function updateModeHint() {
    var differs = state.sessionId && state.sessionKind && state.sessionKind !== currentMode();
    el.modeHint.hidden = !differs;
  }

  function sessionUrl(sessionId) {
    return sessionId ? "/?session=" + encodeURIComponent(sessionId) : "/";
  }

  function documentUrl(chunk) {
    // Document ids may contain "/" (path segments) but also "?" or "#": encode each segment.
    return "/documents/" + chunk.document_id.split("/").map(encodeURIComponent).join("/") + "?tenant=" + encodeURIComponent(config.tenant) +
      "&chunk=" + encodeURIComponent(chunk.chunk_id) + "#passage";
  }

  function setBusy(busy) {
    el.send.disabled = busy || !state.connected;
    el.stop.disabled = !busy;
    el.stop.hidden = !busy;
    el.form.setAttribute("aria-busy", busy ? "true" : "false");
  }

  function showBanner(text, linkText, href) {
    el.banner.replaceChildren(make("span", null, text));
    if (linkText) {
      var link = make("a", null, linkText);
      link.href = href;
      el.banner.append(" ", link);
    }
    el.banner.hidden = false;
  }

  /* --- the socket ------------------------------------------------------------------- */

  function connect() {
    clearTimeout(state.reconnectTimer);
    setConnection("connecting", "Connecting…");
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + config.wsPath);
    state.socket = socket;
    socket.addEventListener("open", function () {
      if (state.socket !== socket) return;
      var reconnected = state.retries > 0;
      state.connected = true;
      state.retries = 0;
      setConnection("online", "Connected");
      setBusy(!!state.pending);
      // After a dropped connection, reload the finished turns: the server kept them, the
      // unfinished answer (if any) was discarded.
      if (state.sessionId) requestHistory(state.sessionId, reconnected);
    });
    socket.addEventListener("message", function (message) {
      if (state.socket !== socket) return;
      var frame;
      try { frame = JSON.parse(message.data); } catch (e) { return; }
      handleFrame(frame);
    });
    socket.addEventListener("close", function (event) {
      if (state.socket !== socket) return;
      state.connected = false;
      state.socket = null;
      if (state.pending) finishPending("interrupted", "The connection dropped before the answer was finished. It was not saved; ask again.");
      setBusy(false);
      if (event.code === 4401) {
        state.signedOut = true;
        setConnection("offline", "Signed out");
        showBanner("Your session has ended.", "Sign in again", "/login/?next=" + encodeURIComponent(location.pathname + location.search));
        return;
      }
      scheduleReconnect();
    });
  }

  function scheduleReconnect() {
    if (state.signedOut) return;
    if (state.retries === 0 && !state.pending) announce("Connection lost. Reconnecting…");
    var delay = Math.min(15000, 1000 * Math.pow(2, state.retries)) * (0.75 + Math.random() / 2);
    state.retries += 1;
    setConnection("offline", "Offline: reconnecting in " + Math.ceil(delay / 1000) + " s…");
    state.reconnectTimer = setTimeout(connect, delay);
  }

  function setConnection(kind, text) {
    el.connection.dataset.state = kind;
    el.connection.textContent = text;
  }

  function send(message) {
    if (!state.socket || state.socket.readyState !== WebSocket.OPEN) return false;
    state.socket.send(JSON.stringify(message));
    return true;
  }

  function nextRequestId() {
    state.requestSeq += 1;
    return "r" + state.requestSeq + "-" + Date.now().toString(36);
  }

  /* --- frames from the server --------------------------------------------------------- */

  function handleFrame(frame) {
    var data = frame.data || {};
    var pending = state.pending;
    var forPending = pending && frame.request_id === pending.requestId;
    switch (frame.event) {
      case "history":
        if (frame.request_id === state.historyRequest) renderHistory(data);
        return;
      case "session":
        if (forPending) adoptSession(data, pending);
        return;
      case "citations":
        if (forPending) {
          // The chat's comes first: the context, numbered as the model sees it, which the streamed
          // text's [n] markers use until "completed" brings the stored answer, renumbered, and what
          // it cites. The agent's comes after its text: the passages its answer cited.
          pending.citations = data.citations || [];
          pending.alsoRetrieved = [];
          pending.context = pending.mode !== "agent";
          showSources(pending);
          scheduleRender(pending);
        }
        return;
      case "run":
        if (forPending) pending.phase.textContent = "Researching…";
        return;
      case "step":
        if (forPending) recordStep(pending, data);
        return;
      case "tool_result":
        if (forPending) recordToolResult(pending, data);
        return;
      case "reasoning_delta":
        if (forPending) appendReasoning(pending, data.text || "");
        return;
      case "text_delta":
        if (forPending) {
          pending.text += data.text || "";
          if (pending.mode !== "agent") pending.phase.hidden = true;
          scheduleRender(pending);
        }
        return;
      case "usage":
        if (forPending) pending.usage = data;
        return;
      case "completed":
        if (forPending) {
          pending.completed = data;
          if (data.message && typeof data.message.content === "string") pending.text = data.message.content;
          pending.citations = data.citations || pending.citations;
          pending.alsoRetrieved = data.also_retrieved || [];
          pending.context = false;
          if (pending.mode === "agent" && typeof data.run_id === "string") pending.runId = data.run_id;  // feedback addresses it
          adoptTurnIds(pending, data);
          finishPending("completed");
          if (state.shownAnswer === pending || !state.shownAnswer) showSources(pending);
          touchSession(state.sessionId);
          // A regenerated answer or an edited question is a new version: reload to show the versions.
          if (pending.action) requestHistory(state.sessionId, false);
        }
        return;
      case "cancelled":
        if (forPending) {
          finishPending("stopped", "Stopped. This answer was not saved.");
          // A stopped regenerate or edit stored nothing: bring back the conversation as it was.
          if (pending.action) requestHistory(state.sessionId, false);
        }
        return;
      case "error":
        if (forPending) {
          finishPending("error", data.detail || "Something went wrong. Try again.", data.error);
        } else if (frame.request_id && frame.request_id === state.historyRequest) {
          historyFailed(data);
        } else if (data.error !== "not_authenticated") {
          announce(data.detail || "Something went wrong.");
        }
        return;
      default:
        // Agent progress and future events: show that work is going on, never their raw payload.
        if (forPending) {
          pending.steps = (pending.steps || 0) + 1;
          pending.phase.hidden = false;
          pending.phase.textContent = "Working… (step " + pending.steps + ")";
        }
    }
  }

  function adoptSession(data, pending) {
    state.sessionId = data.session_id;
    state.sessionKind = data.kind;
    if (data.created) {
      history.pushState({ session: data.session_id }, "", sessionUrl(data.session_id));
      addSessionItem({ session_id: data.session_id, kind: data.kind, title: titleFrom(pending.prompt) }, true);
      el.title.textContent = titleFrom(pending.prompt);
    } else if (state.untitled === data.session_id && !pending.action) {
      // Started by attaching files: the server names it after this first question, and so does the page.
      var item = findSessionItem(data.session_id);
      if (item) setSessionTitle(item, titleFrom(pending.prompt));
      el.title.textContent = titleFrom(pending.prompt);
    }
    state.untitled = null;
    markCurrentSession();
    updateModeHint();
    if (data.created) sessionChanged();
  }

  function titleFrom(prompt) {
    var flat = prompt.replace(/\s+/g, " ").trim();
    return flat.length > 80 ? flat.slice(0, 80) : flat || "New conversation";
  }

  /* --- asking ----------------------------------------------------------------------- */

  /* ``action``: {type: "regenerate", answer} or {type: "edit", question} (chatux.js); none for a new question. */
  function ask(prompt, action) {
    if (state.pending) return;
    if (!prompt.trim()) {
      announce("Type a question first.");
      el.prompt.focus();
      return;
    }
    if (prompt.length > config.maxPrompt) {
      announce("The question is too long: at most " + config.maxPrompt.toLocaleString() + " characters.");
      return;
    }
    var mode = action ? "chat" : currentMode();
    if (!action && state.sessionId && state.sessionKind && state.sessionKind !== mode) {
      // A conversation has one kind; switching modes starts a new one.
      startNewConversation(false);
    }
    var requestId = nextRequestId();
    var message = { type: "ask", request_id: requestId, prompt: prompt, mode: mode, session_id: state.sessionId, tenant: config.tenant };
    if (action && action.type === "regenerate") {
      message = { type: "regenerate", request_id: requestId, session_id: state.sessionId, turn_id: action.answer.turnId, tenant: config.tenant };
    } else if (action && action.type === "edit") {
      message = { type: "edit", request_id: requestId, prompt: prompt, session_id: state.sessionId, turn_id: action.question.turnId, tenant: config.tenant };
    }
    if (!send(message)) {
      announce("Not connected. Your question was kept; send it again once reconnected.");
      return;
    }
    el.greeting.hidden = true;
    var question = null;
    if (action) dropFrom(action.type === "regenerate" ? action.answer.node : action.question.node);
    if (action && action.type === "regenerate") {
      question = action.answer.question || null;
    } else {
      question = userMessage(prompt);
      el.messages.append(question.node);
    }
    var answer = assistantMessage();
    answer.action = action ? action.type : null;
    answer.actionSpec = action || null;
    answer.question = question;
    answer.requestId = requestId;
    answer.prompt = prompt;
    answer.mode = mode;
    answer.phase.textContent = mode === "agent" ? "Planning and searching…" : "Searching the knowledge base…";
    answer.phase.hidden = false;
    answer.node.setAttribute("aria-busy", "true");
    el.messages.append(answer.node);
    state.pending = answer;
    el.prompt.value = "";
    setBusy(true);
    announce("Answering…");
    answer.node.scrollIntoView({ block: "nearest" });
  }

  function stop() {
    if (!state.pending) return;
    announce("Stopping…");
    if (!send({ type: "cancel", request_id: state.pending.requestId })) {
      finishPending("stopped", "Stopped. This answer was not saved.");
    }
  }

  /* --- messages ----------------------------------------------------------------------- */

  /* A question on screen: {node, text, turnId, versions}; ``turn`` is its stored turn (history), if any. */
  function userMessage(text, turn) {
    var node = make("article", "message message-user");
    node.append(make("h3", "message-author", "You"), make("p", "message-text", text));
    var question = { node: node, text: text, turnId: turn ? turn.turn_id : null, versions: turn ? turn.versions : null, bar: null };
    questionBar(question);
    return question;
  }

  function questionBar(question) {
    if (!window.QuarryChatUX) return;
    if (question.bar) question.bar.remove();
    question.bar = window.QuarryChatUX.questionActions(question);
    question.node.append(question.bar);
  }

  /* The stored turns of a finished answer (and of its question), which the answer actions address. */
  function adoptTurnIds(answer, data) {
    if (typeof data.turn_id !== "number") return;
    answer.turnId = data.turn_id;
    answer.versions = [data.turn_id];
    answer.feedback = null;
    if (answer.question && !answer.question.turnId && typeof data.prompt_turn_id === "number") {
      answer.question.turnId = data.prompt_turn_id;
      answer.question.versions = [data.prompt_turn_id];
      questionBar(answer.question);
    }
  }

  /* Remove ``node`` and everything after it: a regenerated answer or an edited question replaces them. */
  function dropFrom(node) {
    var removed = [];
    for (var n = node; n; n = n.nextElementSibling) removed.push(n);
    removed.forEach(function (n) { n.remove(); });
    state.answers = state.answers.filter(function (a) { return removed.indexOf(a.node) === -1; });
    if (state.shownAnswer && removed.indexOf(state.shownAnswer.node) !== -1) resetSources();
  }

  function assistantMessage() {
    var node = make("article", "message message-assistant");
    var answer = {
      node: node, text: "", citations: [], alsoRetrieved: [], usage: null, completed: null, renderQueued: false,
      sourceNumbers: {}, sourceCount: 0, steps: null,
      phase: make("p", "phase"), content: make("div", "markdown"), footer: make("div", "message-footer"),
      reasoning: null, sourcesButton: null,
    };
    answer.phase.hidden = true;
    answer.phase.setAttribute("aria-hidden", "true");  // the status line announces progress once
    node.append(make("h3", "message-author", "Quarry"), answer.phase, answer.content, answer.footer);
    state.answers.push(answer);
    return answer;
  }

  function renderAnswer(answer) {
    var known = {};
    numbered(answer).forEach(function (source) { known[source.n] = true; });
    answer.content.innerHTML = window.QuarryMarkdown.render(answer.text, {
      cite: function (n) { return known[n] === true; },
      highlight: window.QuarryChatUX ? window.QuarryChatUX.highlight : null,
    });
  }

  /* The answer's sources with the numbers its [n] markers use: the position in the chat
     pipeline's citations, or the agent's source number (the order tools first returned them). */
  function numbered(answer) {
    var agent = answer.sourceCount > 0;
    return answer.citations.map(function (citation, index) {
      return { n: agent ? answer.sourceNumbers[citation.chunk_id] : index + 1, citation: citation };
    }).filter(function (source) { return typeof source.n === "number"; });
  }

  /* --- agent progress --------------------------------------------------------------------- */

  var TOOL_NAMES = {
    hybrid_search: "Searched", keyword_search: "Searched by keyword", semantic_search: "Searched by meaning",
    fetch_chunks: "Read passages",
  };

  function stepLog(answer) {
    if (!answer.steps) {
      var details = make("details", "steps");
      details.append(make("summary", null, "Research steps"), make("ol", "steps-list"));
      answer.node.insertBefore(details, answer.content);
      answer.steps = details;
    }
    return answer.steps.querySelector(".steps-list");
  }

  function recordStep(answer, data) {
    // Text streamed before a step is the agent's note to itself, not the answer.
    var note = answer.text.trim();
    answer.text = "";
    renderAnswer(answer);
    var list = stepLog(answer);
    if (note) list.append(make("li", "step-note", note));
    (data.calls || []).forEach(function (call) {
      var args = call.arguments || {};
      var what = typeof args.query === "string" ? "“" + args.query + "”"
        : Array.isArray(args.ids) ? args.ids.length + " passage" + (args.ids.length === 1 ? "" : "s") : "";
      list.append(make("li", null, (TOOL_NAMES[call.tool] || call.tool) + (what ? " " + what : "")));
    });
    answer.steps.querySelector("summary").textContent = "Research steps (" + (data.step || list.children.length) + ")";
    answer.phase.hidden = false;
    answer.phase.textContent = "Researching… (step " + (data.step || 1) + ")";
  }

  function recordToolResult(answer, data) {
    (data.chunk_ids || []).forEach(function (chunkId) {
      if (!(chunkId in answer.sourceNumbers)) {
        answer.sourceCount += 1;
        answer.sourceNumbers[chunkId] = answer.sourceCount;
      }
    });
    if (data.ok === false) stepLog(answer).append(make("li", "step-failed", "A tool failed: " + (data.error || "no detail")));
  }

  function scheduleRender(answer) {
    if (answer.renderQueued) return;
    answer.renderQueued = true;
    requestAnimationFrame(function () {
      answer.renderQueued = false;
      renderAnswer(answer);
    });
  }

  function appendReasoning(answer, text) {
    if (!answer.reasoning) {
      var details = make("details", "reasoning");
      details.append(make("summary", null, "Reasoning"), make("p", "reasoning-text"));
      answer.node.insertBefore(details, answer.content);
      answer.reasoning = details;
    }
    var target = answer.reasoning.querySelector(".reasoning-text");
    target.textContent += text;
  }

  function answerFooter(answer) {
    answer.footer.replaceChildren();
    if (answer.citations.length || answer.alsoRetrieved.length) {
      var button = make("button", "link-button", answer.citations.length && !answer.context
        ? "Sources (" + answer.citations.length + ")"
        : "Retrieved passages (" + (answer.context ? answer.citations.length : answer.alsoRetrieved.length) + ")");
      button.type = "button";
      button.addEventListener("click", function () { showSources(answer, true); });
      answer.footer.append(button);
    }
    var done = answer.completed;
    if (done) {
      var usage = done.usage || answer.usage;
      var meta = "Answered by " + modelLabel(done.provider + "/" + done.provider_model) + (usage ? " · " + usage.total_tokens + " tokens" : "");
      answer.footer.append(make("span", "meta", meta));
    } else if (answer.model) {
      answer.footer.append(make("span", "meta", "Answered by " + modelLabel(answer.model)));
    }
    if (window.QuarryChatUX && answer.node.dataset.state !== "error" && answer.text) {
      answer.sourceLinks = numbered(answer).map(function (source) {
        var chunk = state.chunkCache[source.citation.chunk_id];
        return { n: source.n, href: location.origin + documentUrl(source.citation), title: chunk ? chunk.title || chunk.document_id : "" };
      });
      answer.footer.prepend(window.QuarryChatUX.answerActions(answer));
    }
  }

  /* "<provider>/<model>"; the built-in offline model is named as such, so nobody mistakes it for an LLM. */
  function modelLabel(model) {
    return model.indexOf("quarry/") === 0 ? model.slice("quarry/".length) + " (built-in offline model)" : model;
  }

  function finishPending(outcome, detail, code) {
    var answer = state.pending;
    if (!answer) return;
    state.pending = null;
    answer.phase.hidden = true;
    renderAnswer(answer);
    answer.node.dataset.state = outcome;
    if (outcome !== "completed") {
      var alert = make("div", "alert " + (outcome === "error" ? "alert-error" : "alert-notice"));
      alert.setAttribute("role", outcome === "error" ? "alert" : "status");
      alert.append(make("span", null, detail));
      if (code !== "agent_unavailable") {
        // A stopped or failed answer stored nothing, its question neither: asking again replaces both.
        var retry = make("button", "link-button", outcome === "stopped" ? "Regenerate" : "Try again");
        retry.type = "button";
        retry.addEventListener("click", function () {
          if (state.pending) return;
          alert.remove();
          if (!answer.actionSpec) {
            if (answer.question) answer.question.node.remove();
            answer.node.remove();
            state.answers = state.answers.filter(function (a) { return a !== answer; });
            if (state.shownAnswer === answer) resetSources();
            if (answer.mode) setMode(answer.mode);
            ask(answer.prompt);
            return;
          }
          // An action asks again in place: the failed attempt (and an edit's resent question) goes first.
          dropFrom(answer.actionSpec.type === "edit" && answer.question ? answer.question.node : answer.node);
          ask(answer.prompt, answer.actionSpec);
        });
        alert.append(" ", retry);
      }
      answer.node.append(alert);
    }
    answerFooter(answer);
    answer.node.setAttribute("aria-busy", "false");
    setBusy(false);
    announce({ completed: "Answer complete.", stopped: "Stopped.", error: "The answer failed.", interrupted: "Connection lost." }[outcome] || "");
    if (outcome === "interrupted") {
      // The reconnect reloads the stored turns, which replaces this message: keep the question.
      state.interrupted = true;
      if (!el.prompt.value.trim()) el.prompt.value = answer.prompt;
    } else {
      el.prompt.focus();
    }
  }

  /* --- sources ---------------------------------------------------------------------- */

  /* The cited passages, numbered as the answer's [n] markers, then the passages that were
     retrieved and given to the model but not cited ("Also retrieved", unnumbered). Every text
     goes in through textContent: titles and snippets are documents' words, never markup. */
  function showSources(answer, focus) {
    state.shownAnswer = answer;
    el.sources.replaceChildren();
    var sources = numbered(answer);
    var also = answer.alsoRetrieved || [];
    showAlsoRetrieved(also);
    var ids = sources.map(function (source) { return source.citation.chunk_id; });
    if (!ids.length) {
      el.sourcesHint.textContent = answer === state.pending && answer.mode === "agent"
        ? "The sources appear when the answer is complete."
        : also.length ? "This answer cites no passage." : "No passages were found for this question.";
      el.sourcesHint.hidden = false;
    } else {
      // While the chat's answer is written (or after it was stopped) the list is its whole context.
      el.sourcesHint.textContent = "The passages given to the model, numbered as the answer cites them. " +
        "A complete answer keeps here only the ones it cites.";
      el.sourcesHint.hidden = !answer.context;
      sources.forEach(function (source) { el.sources.append(sourceItem(source.citation, source.n)); });
      if (focus) focusSource(sources[0].n);
      showGraph(answer, sources);
    }
    // A withheld citation (a passage its reader may no longer read, issue 34) has no id to load.
    var shown = sources.map(function (source) { return source.citation; }).concat(also)
      .filter(function (citation) { return !citation.withheld; });
    if (!shown.length) return;
    loadChunks(shown.map(function (citation) { return citation.chunk_id; })).then(function () {
      if (state.shownAnswer !== answer) return;
      document.querySelectorAll(".sources .source:not(.source-withheld)").forEach(function (item) {
        var chunk = state.chunkCache[item.dataset.chunkId];
        var snippet = item.querySelector(".source-snippet");
        if (chunk) {
          item.querySelector(".source-title").textContent = chunk.title || chunk.document_id;
          snippet.textContent = excerpt(chunk.text, 220);
        } else {
          snippet.textContent = "This passage is no longer in the knowledge base.";
          item.querySelector(".source-title").removeAttribute("href");
        }
      });
    }, function () {
      if (state.shownAnswer !== answer) return;
      document.querySelectorAll(".sources .source:not(.source-withheld) .source-snippet").forEach(function (node) {
        node.textContent = "Could not load this passage. Open the source to read it.";
      });
    });
  }

  /* One passage of the panel; ``n`` is its citation number, or null for an uncited one. */
  function sourceItem(citation, n) {
    var item = make("li", n == null ? "source source-uncited" : "source");
    item.dataset.chunkId = citation.chunk_id;
    if (n != null) {
      item.id = "source-" + n;
      item.tabIndex = -1;
      item.append(make("span", "source-number", String(n)));
    }
    var main = make("div", "source-body");
    if (citation.withheld) {
      // The server keeps no trace of what it was for this reader: say so, link nothing, load nothing.
      item.classList.add("source-withheld");
      main.append(make("p", "source-title", "Source withheld"),
                  make("p", "source-snippet", "You can no longer read the document this passage came from."));
      item.append(main);
      return item;
    }
    var link = make("a", "source-title", citation.document_id);
    if (citation.file_id && window.QuarryChatFiles) {
      link.textContent = window.QuarryChatFiles.label(citation.file_id);  // attached to this conversation: no page
    } else {
      link.href = documentUrl(citation);
      link.target = "_blank";
      link.rel = "noopener";
    }
    var snippet = make("p", "source-snippet", "Loading…");
    // Every store's passages carry the score of their own store's search: one scale (chat/pipeline.py).
    var score = make("p", "source-score", (citation.file_id ? "Attached file · score " : "Score ") + formatScore(citation.score));
    main.append(link, snippet, score);
    if (citation.graph_path && citation.graph_path.length) {
      main.append(make("p", "source-path", "Found through " + citation.graph_path.join(" → ")));
    }
    item.append(main);
    return item;
  }

  function showAlsoRetrieved(also) {
    if (!el.alsoRetrieved || !el.alsoList) return;
    el.alsoList.replaceChildren();
    also.forEach(function (citation) { el.alsoList.append(sourceItem(citation, null)); });
    el.alsoRetrieved.hidden = also.length === 0;
  }

  /* The picture of how the cited passages connect through entities (static/chat/graph.js). */
  function showGraph(answer, sources) {
    var section = document.getElementById("sources-graph");
    var canvas = document.getElementById("sources-graph-canvas");
    if (!section || !canvas) return;
    section.hidden = true;
    if (sources.length < 2 || !window.QuarryGraph) return;
    var numberOf = {};
    sources.forEach(function (source) { numberOf[source.citation.chunk_id] = source.n; });
    fetch("/v1/graph/picture", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrfToken },
      body: JSON.stringify({ ids: Object.keys(numberOf), tenant: config.tenant }),
    }).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    }).then(function (picture) {
      if (state.shownAnswer !== answer) return;
      section.hidden = false;  // before drawing: a hidden picture cannot measure its labels
      window.QuarryGraph.draw(canvas, picture, {
        label: function (p) { return "[" + numberOf[p.chunk_id] + "] " + (p.title || p.document_id); },
        href: function (p) { return documentUrl(p); },
        empty: "These sources share no entity in the knowledge graph.",
      });
      section.hidden = false;
    }, function () { section.hidden = true; });
  }

  function focusSource(n) {
    var item = document.getElementById("source-" + n);
    if (!item) return;
    item.focus({ preventScroll: true });
    item.scrollIntoView({ block: "nearest" });
    item.classList.remove("flash");
    void item.offsetWidth;  // restart the highlight animation
    item.classList.add("flash");
  }

  function loadChunks(ids) {
    var missing = ids.filter(function (id) { return !(id in state.chunkCache); });
    var files = window.QuarryChatFiles;
    var attached = files ? missing.filter(files.owns) : [];
    if (attached.length) {  // the conversation's own passages come from its files endpoint
      missing = missing.filter(function (id) { return attached.indexOf(id) < 0; });
      return Promise.all([loadChunks(missing), files.passages(attached).then(function (chunks) {
        attached.forEach(function (id) { state.chunkCache[id] = null; });
        chunks.forEach(function (chunk) { state.chunkCache[chunk.chunk_id] = chunk; });
      })]);
    }
    if (!missing.length) return Promise.resolve();
    return fetch("/v1/chunks/fetch", {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrfToken },
      body: JSON.stringify({ ids: missing, tenant: config.tenant }),
    }).then(function (response) {
      if (!response.ok) throw new Error("HTTP " + response.status);
      return response.json();
    }).then(function (payload) {
      missing.forEach(function (id) { state.chunkCache[id] = null; });
      (payload.chunks || []).forEach(function (chunk) { state.chunkCache[chunk.chunk_id] = chunk; });
    });
  }

  function excerpt(text, size) {
    // Markdown headings' "#" marks are markup, not words of the passage.
    var flat = String(text || "").replace(/(^|\n)#{1,6}[ \t]+/g, "$1").replace(/\s+/g, " ").trim();
    return flat.length > size ? flat.slice(0, size).replace(/\s+\S*$/, "") + " …" : flat;
  }

  function formatScore(score) {
    if (typeof score !== "number") return "–";
    return score >= 10 ? score.toFixed(1) : score.toPrecision(3);
  }

  /* --- history: opening a conversation, reconnecting --------------------------------------- */

  function requestHistory(sessionId, afterReconnect) {
    state.historyRequest = nextRequestId();
    state.historyAfterReconnect = !!afterReconnect;
    if (!afterReconnect) announce("Loading the conversation…");
    send({ type: "history", request_id: state.historyRequest, session_id: sessionId, tenant: config.tenant });
  }

  function renderHistory(transcript) {
    if (transcript.session_id !== state.sessionId || state.pending) return;
    clearConversation();
    state.sessionKind = transcript.kind;
    setMode(transcript.kind);
    el.title.textContent = transcript.title;
    el.greeting.hidden = transcript.turns.length > 0;
    if (transcript.truncated) el.messages.append(make("p", "notice", "Older messages are not shown."));
    var last = null, lastQuestion = null;
    transcript.turns.forEach(function (turn) {
      if (turn.role === "user") {
        lastQuestion = userMessage(turn.content, turn);
        el.messages.append(lastQuestion.node);
        return;
      }
      var answer = assistantMessage();
      answer.question = lastQuestion;
      answer.turnId = turn.turn_id || null;
      answer.runId = turn.run_id || null;
      answer.versions = turn.versions || null;
      answer.feedback = turn.feedback || null;
      answer.text = turn.content;
      answer.citations = turn.citations || [];
      answer.model = turn.model;
      (turn.sources || []).forEach(function (source) {
        answer.sourceNumbers[source.chunk_id] = source.source;
        answer.sourceCount += 1;
      });
      renderAnswer(answer);
      answer.node.dataset.state = "completed";
      answerFooter(answer);
      if (turn.stop_reason) {
        answer.node.dataset.state = "stopped";
        var why = turn.stop_reason === "running" ? "This research is still running elsewhere." :
          "This research stopped before an answer (" + turn.stop_reason.replace(/_/g, " ") + ").";
        answer.node.append(make("p", "alert alert-notice", why));
      }
      el.messages.append(answer.node);
      last = answer;
    });
    if (last) showSources(last); else resetSources();
    if (state.historyAfterReconnect && state.interrupted) {
      el.messages.append(make("p", "notice", "The connection dropped while an answer was being written; it was not saved. " +
        "Your question is back in the box below."));
    }
    state.interrupted = false;
    announce(state.historyAfterReconnect ? "Reconnected." : "Conversation loaded.");
    markCurrentSession();
    updateModeHint();
    var end = el.messages.lastElementChild;
    if (end) end.scrollIntoView({ block: "end" });
  }

  function historyFailed(data) {
    if (data.error === "not_found") {
      startNewConversation(true);
      announce("That conversation does not exist or was deleted.");
      showBanner("That conversation does not exist or was deleted. You are in a new conversation.");
    } else {
      announce(data.detail || "Could not load the conversation.");
    }
  }

  function clearConversation() {
    el.messages.querySelectorAll(".message, .notice").forEach(function (node) { node.remove(); });
    state.answers = [];
    resetSources();
  }

  function resetSources() {
    state.shownAnswer = null;
    el.sources.replaceChildren();
    showAlsoRetrieved([]);
    el.sourcesHint.textContent = "Sources cited in an answer appear here.";
    var graph = document.getElementById("sources-graph");
    if (graph) graph.hidden = true;
    el.sourcesHint.hidden = false;
  }

  function startNewConversation(updateUrl) {
    if (state.pending) return;
    state.sessionId = null;
    state.sessionKind = null;
    clearConversation();
    el.greeting.hidden = false;
    el.title.textContent = "New conversation";
    if (updateUrl) history.pushState({ session: null }, "", "/");
    markCurrentSession();
    updateModeHint();
    sessionChanged();
  }

  function openSession(sessionId, push) {
    if (state.pending) {
      announce("Stop the answer being written before switching conversations.");
      return;
    }
    el.banner.hidden = true;
    state.sessionId = sessionId;
    state.sessionKind = null;
    if (push) history.pushState({ session: sessionId }, "", sessionUrl(sessionId));
    markCurrentSession();
    sessionChanged();
    closeSessionsOnPhone();
    if (state.connected) requestHistory(sessionId, false);
  }

  /* --- the session list ---------------------------------------------------------------- */

  function sessionItems() { return el.sessionList.querySelectorAll(".session-item"); }

  function findSessionItem(sessionId) {
    return Array.prototype.find.call(sessionItems(), function (item) { return item.dataset.sessionId === sessionId; });
  }

  function markCurrentSession() {
    sessionItems().forEach(function (item) {
      var link = item.querySelector(".session-link");
      if (item.dataset.sessionId === state.sessionId) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    });
  }

  function addSessionItem(session, atTop) {
    var template = document.getElementById("session-item-template");
    var item = template.content.firstElementChild.cloneNode(true);
    item.dataset.sessionId = session.session_id;
    item.dataset.kind = session.kind;
    var link = item.querySelector(".session-link");
    link.href = sessionUrl(session.session_id);
    item.querySelector(".session-badge").hidden = session.kind !== "agent";
    setSessionTitle(item, session.title);
    item.querySelector("form").action = "/chat/sessions/" + encodeURIComponent(session.session_id) + "/delete";
    var empty = el.sessionList.querySelector(".empty");
    if (empty) empty.remove();
    if (atTop) el.sessionList.prepend(item); else el.sessionList.append(item);
    return item;
  }

  function setSessionTitle(item, title) {
    item.querySelector(".session-title").textContent = title;
    item.querySelector('[data-action="rename"]').setAttribute("aria-label", "Rename “" + title + "”");
    item.querySelector('[data-action="delete"] button').setAttribute("aria-label", "Delete “" + title + "”");
  }

  function touchSession(sessionId) {
    var item = findSessionItem(sessionId);
    if (item && item !== el.sessionList.firstElementChild) el.sessionList.prepend(item);
  }

  function postSessionAction(sessionId, action, fields) {
    var form = new URLSearchParams(fields || {});
    form.set("tenant", config.tenant);
    return fetch("/chat/sessions/" + encodeURIComponent(sessionId) + "/" + action, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Accept": "application/json", "X-CSRFToken": csrfToken },
      body: form,
    }).then(function (response) {
      return response.json().catch(function () { return {}; }).then(function (payload) {
        if (!response.ok) throw new Error(payload.detail || "The request failed (" + response.status + ").");
        return payload;
      });
    });
  }

  function beginRename(item) {
    if (item.querySelector(".rename-form")) return;
    var titleNode = item.querySelector(".session-title");
    var form = make("form", "rename-form");
    var inputId = "rename-" + item.dataset.sessionId;
    var label = make("label", "sr-only", "New title");
    label.htmlFor = inputId;
    var input = make("input");
    input.id = inputId;
    input.type = "text";
    input.maxLength = Number(body.dataset.titleMax || 200);
    input.value = titleNode.textContent;
    var save = make("button", "small primary", "Save");
    save.type = "submit";
    var cancel = make("button", "small", "Cancel");
    cancel.type = "button";
    form.append(label, input, save, cancel);
    item.classList.add("renaming");
    item.append(form);
    input.focus();
    input.select();
    function close() {
      form.remove();
      item.classList.remove("renaming");
      item.querySelector('[data-action="rename"]').focus();
    }
    cancel.addEventListener("click", close);
    form.addEventListener("keydown", function (event) { if (event.key === "Escape") { event.preventDefault(); close(); } });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      save.disabled = true;
      postSessionAction(item.dataset.sessionId, "rename", { title: input.value }).then(function (payload) {
        setSessionTitle(item, payload.session.title);
        if (item.dataset.sessionId === state.sessionId) el.title.textContent = payload.session.title;
        announce("Conversation renamed.");
        close();
      }, function (error) {
        save.disabled = false;
        announce(error.message);
      });
    });
  }

  function deleteSession(item) {
    var title = item.querySelector(".session-title").textContent;
    if (!window.confirm("Delete the conversation “" + title + "”? This cannot be undone.")) return;
    var sessionId = item.dataset.sessionId;
    postSessionAction(sessionId, "delete").then(function () {
      var next = item.nextElementSibling || item.previousElementSibling;
      item.remove();
      if (!sessionItems().length) el.sessionList.append(make("li", "empty", "No conversations yet."));
      if (sessionId === state.sessionId) startNewConversation(true);
      announce("Conversation deleted.");
      var focusTarget = next && next.querySelector ? next.querySelector(".session-link") : null;
      (focusTarget || el.newChat).focus();
    }, function (error) { announce(error.message); });
  }

  function closeSessionsOnPhone() {
    if (el.sessionsToggle && getComputedStyle(el.sessionsToggle).display !== "none") {
      el.sessionsPanel.classList.remove("open");
      el.sessionsToggle.setAttribute("aria-expanded", "false");
    }
  }

  /* --- wiring ----------------------------------------------------------------------------- */

  el.form.addEventListener("submit", function (event) {
    event.preventDefault();
    ask(el.prompt.value);
  });

  el.prompt.addEventListener("keydown", function (event) {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      if (!state.pending) ask(el.prompt.value);
    } else if (event.key === "Escape" && state.pending) {
      event.preventDefault();
      stop();
    }
  });

  el.stop.addEventListener("click", stop);

  el.form.querySelectorAll('input[name="mode"]').forEach(function (radio) {
    radio.addEventListener("change", updateModeHint);
  });

  el.messages.addEventListener("click", function (event) {
    var cite = event.target.closest("a.cite");
    if (!cite) return;
    event.preventDefault();
    var node = cite.closest(".message-assistant");
    var answer = state.answers.find(function (a) { return a.node === node; });
    if (!answer) return;
    if (state.shownAnswer !== answer) showSources(answer);
    focusSource(Number(cite.dataset.cite));
  });

  el.sessionList.addEventListener("click", function (event) {
    var item = event.target.closest(".session-item");
    if (!item) return;
    if (event.target.closest(".session-link") && !event.ctrlKey && !event.metaKey && !event.shiftKey && event.button === 0) {
      event.preventDefault();
      if (item.dataset.sessionId !== state.sessionId) openSession(item.dataset.sessionId, true);
      else closeSessionsOnPhone();
    } else if (event.target.closest('[data-action="rename"]')) {
      beginRename(item);
    }
  });

  el.sessionList.addEventListener("submit", function (event) {
    var form = event.target.closest('[data-action="delete"]');
    if (!form) return;
    event.preventDefault();
    deleteSession(form.closest(".session-item"));
  });

  el.newChat.addEventListener("click", function (event) {
    event.preventDefault();
    if (state.pending) { announce("Stop the answer being written first."); return; }
    el.banner.hidden = true;
    startNewConversation(true);
    closeSessionsOnPhone();
    el.prompt.focus();
  });

  if (el.sessionsToggle) {
    el.sessionsToggle.addEventListener("click", function () {
      var open = el.sessionsPanel.classList.toggle("open");
      el.sessionsToggle.setAttribute("aria-expanded", open ? "true" : "false");
      if (open) {
        var first = el.sessionsPanel.querySelector("a, button");
        if (first) first.focus();
      }
    });
  }

  window.addEventListener("popstate", function () {
    var sessionId = new URLSearchParams(location.search).get("session");
    if (sessionId === state.sessionId) return;
    if (sessionId) openSession(sessionId, false); else startNewConversation(false);
  });

  /* Hooks for static/chat/files.js (files attached to a conversation): it reads the current
     session, starts one before the first question when a file is attached, and hears changes. */
  function sessionChanged() {
    document.dispatchEvent(new CustomEvent("quarry:session", { detail: { sessionId: state.sessionId } }));
  }
  window.QuarryChat = {
    tenant: config.tenant,
    csrfToken: csrfToken,
    sessionId: function () { return state.sessionId; },
    mode: currentMode,
    notice: function (text) { el.greeting.hidden = true; el.messages.append(make("p", "notice", text)); },
    adoptNewSession: function (sessionId) {
      state.sessionId = sessionId;
      state.sessionKind = "chat";
      state.untitled = sessionId;  // until its first question names it (adoptSession)
      history.pushState({ session: sessionId }, "", sessionUrl(sessionId));
      addSessionItem({ session_id: sessionId, kind: "chat", title: "New conversation" }, true);
      markCurrentSession();
      updateModeHint();
      sessionChanged();
    },
  };

  var initial = new URLSearchParams(location.search).get("session");
  if (initial) {
    state.sessionId = initial;
    markCurrentSession();
  }
  if (window.QuarryChatUX) {
    window.QuarryChatUX.init({
      tenant: config.tenant,
      csrfToken: csrfToken,
      announce: announce,
      busy: function () { return !!state.pending; },
      sessionId: function () { return state.sessionId; },
      regenerate: function (answer) {
        if (answer.runId) {  // the agent keeps no versions: it researches the question again, as a new run
          setMode("agent");
          ask(answer.question ? answer.question.text : "");
          return;
        }
        ask(answer.question ? answer.question.text : "", { type: "regenerate", answer: answer });
      },
      edit: function (question, prompt) { ask(prompt, { type: "edit", question: question }); },
      select: function (turnId) {
        if (state.pending || !state.sessionId) return;
        state.historyRequest = nextRequestId();
        state.historyAfterReconnect = false;
        announce("Switching version…");
        send({ type: "select", request_id: state.historyRequest, session_id: state.sessionId, turn_id: turnId, tenant: config.tenant });
      },
      openSession: function (sessionId) {
        if (sessionId !== state.sessionId) openSession(sessionId, true); else closeSessionsOnPhone();
      },
      citation: function (link) {
        var node = link.closest(".message-assistant");
        var answer = state.answers.find(function (a) { return a.node === node; });
        var source = answer && numbered(answer).find(function (s) { return s.n === Number(link.dataset.cite); });
        if (!source) return Promise.resolve(null);
        if (source.citation.withheld) return Promise.resolve({ withheld: true });
        var id = source.citation.chunk_id;
        return loadChunks([id]).then(function () { return { chunk: state.chunkCache[id], href: documentUrl(source.citation) }; });
      },
    });
  }
  sessionChanged();
  setBusy(false);
  connect();
})();
