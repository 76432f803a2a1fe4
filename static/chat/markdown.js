/*
 * Quarry's Markdown renderer for model answers: a small subset, safe by construction.
 *
 * The input is HTML-escaped FIRST (& < > " '), so nothing in it can become markup. Only
 * then are a few constructs turned into tags that this file writes itself:
 *   paragraphs (single newlines become <br>), # headings, - / * / 1. lists, > quotes,
 *   ```fenced``` (with a language: ```python) and `inline` code, **strong**, *em* / _em_,
 *   GitHub-style tables (| a | b | over | --- | :-: |; alignment becomes a class, never a style),
 *   [text](http://… or https://…) links (any other scheme stays text),
 *   citation markers [n] / [n, m] -> links to source n, when the caller says n exists.
 * The only input that reaches an attribute is an http(s) URL (escaped, in quotes) and
 * citation numbers (digits only). There is no raw-HTML pass-through of any kind.
 *
 * Exposed as window.QuarryMarkdown = { render(text, options) -> html string, escapeHtml }.
 * options.cite(n) -> true when source n exists (default: never).
 * options.highlight(code, language) -> SAFE html of a fenced block's RAW code (it must escape what
 *   it does not mark up, as highlight.js does), or null to fall back to escaping; ``language`` is
 *   the fence's info word, letters, digits and + # . _ - only, or "" (default: no highlighting).
 */
(function (global) {
  "use strict";

  var ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) { return ESCAPES[c]; });
  }

  // Placeholders for already-rendered pieces; the input can never contain them (see render).
  var CODE = "\u0000", LINK = "\u0001";

  function emphasis(s) {
    return s
      .replace(/\*\*(?=\S)([^*\n]*?\S)\*\*/g, "<strong>$1</strong>")
      .replace(/(^|[^\w*])\*(?=\S)([^*\n]*?\S)\*(?![\w*])/g, "$1<em>$2</em>")
      .replace(/(^|[^\w])_(?=\S)([^_\n]*?\S)_(?!\w)/g, "$1<em>$2</em>");
  }

  function citations(s, cite) {
    return s.replace(/\[(\d{1,3}(?:\s*,\s*\d{1,3})*)\]/g, function (whole, list) {
      var numbers = list.split(/\s*,\s*/).map(Number);
      if (!numbers.every(function (n) { return cite(n); })) return whole;
      return numbers.map(function (n) {
        return '<a class="cite" href="#source-' + n + '" data-cite="' + n + '" aria-label="Source ' + n + '">[' + n + "]</a>";
      }).join("");
    });
  }

  /* One line or paragraph of ALREADY ESCAPED text. */
  function inline(escaped, cite) {
    var codes = [], links = [];
    var s = escaped.replace(/`([^`\n]+)`/g, function (_, code) {
      codes.push("<code>" + code + "</code>");
      return CODE + (codes.length - 1) + CODE;
    });
    s = s.replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s()<>]+)\)/gi, function (_, text, url) {
      links.push('<a href="' + url + '" rel="noopener noreferrer nofollow" target="_blank">' + emphasis(text) + "</a>");
      return LINK + (links.length - 1) + LINK;
    });
    s = emphasis(citations(s, cite));
    return s
      .replace(new RegExp(LINK + "(\\d+)" + LINK, "g"), function (_, i) { return links[Number(i)]; })
      .replace(new RegExp(CODE + "(\\d+)" + CODE, "g"), function (_, i) { return codes[Number(i)]; });
  }

  var FENCE = /^\s{0,3}```/;
  var FENCE_LANGUAGE = /^\s{0,3}```\s*([A-Za-z0-9_+#.-]{1,32})?/;
  var TABLE_DELIMITER = /^\s{0,3}\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?\s*$/;
  var HEADING = /^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  var BULLET = /^\s{0,3}[-*+]\s+(.*)$/;
  var ORDERED = /^\s{0,3}(\d{1,9})[.)]\s+(.*)$/;
  var QUOTE = /^\s{0,3}>\s?(.*)$/;
  var BLANK = /^\s*$/;

  function startsBlock(line) {
    return FENCE.test(line) || HEADING.test(line) || BULLET.test(line) || ORDERED.test(line) || QUOTE.test(line);
  }

  /* The cells of one table row: split on pipes, the outer ones optional. */
  function cells(line) {
    var row = line.trim();
    if (row.charAt(0) === "|") row = row.slice(1);
    if (row.charAt(row.length - 1) === "|") row = row.slice(0, -1);
    return row.split("|").map(function (cell) { return cell.trim(); });
  }

  function isTableStart(lines, i) {
    return lines[i].indexOf("|") !== -1 && i + 1 < lines.length && TABLE_DELIMITER.test(lines[i + 1]) &&
      lines[i + 1].indexOf("-") !== -1 && cells(lines[i]).length === cells(lines[i + 1]).length;
  }

  function table(lines, start, cite) {
    var head = cells(lines[start]);
    var aligns = cells(lines[start + 1]).map(function (d) {
      var left = d.charAt(0) === ":", right = d.charAt(d.length - 1) === ":";
      return left && right ? ' class="align-center"' : right ? ' class="align-right"' : left ? ' class="align-left"' : "";
    });
    function row(values, tag) {
      return "<tr>" + head.map(function (_, n) {
        return "<" + tag + aligns[n] + ">" + inline(escapeHtml(values[n] || ""), cite) + "</" + tag + ">";
      }).join("") + "</tr>";
    }
    var i = start + 2, body = [];
    while (i < lines.length && !BLANK.test(lines[i]) && lines[i].indexOf("|") !== -1) { body.push(row(cells(lines[i]), "td")); i++; }
    var html = '<div class="table-wrap"><table><thead>' + row(head, "th") + "</thead>" +
      (body.length ? "<tbody>" + body.join("") + "</tbody>" : "") + "</table></div>";
    return { html: html, next: i };
  }

  function codeBlock(code, language, highlight) {
    var marked = highlight ? highlight(code, language) : null;
    var label = language ? ' class="language-' + language + '" data-language="' + language + '"' : "";
    return "<pre><code" + label + ">" + (typeof marked === "string" ? marked : escapeHtml(code)) + "</code></pre>";
  }

  function blocks(lines, cite, depth, highlight) {
    var out = [], i = 0, m, buffer;
    while (i < lines.length) {
      var line = lines[i];
      if (BLANK.test(line)) { i++; continue; }
      if (FENCE.test(line)) {
        var language = (FENCE_LANGUAGE.exec(line)[1] || "").toLowerCase();
        buffer = [];
        for (i++; i < lines.length && !FENCE.test(lines[i]); i++) buffer.push(lines[i]);
        i++;  // the closing fence (or the end of a still-streaming answer)
        out.push(codeBlock(buffer.join("\n"), language, highlight));
        continue;
      }
      if (isTableStart(lines, i)) {
        var built = table(lines, i, cite);
        out.push(built.html);
        i = built.next;
        continue;
      }
      if ((m = HEADING.exec(line))) {
        // Inside a message, headings start at h3: the page owns h1 and h2.
        var level = Math.min(6, m[1].length + 2);
        out.push("<h" + level + ">" + inline(escapeHtml(m[2]), cite) + "</h" + level + ">");
        i++;
        continue;
      }
      if (BULLET.test(line) || ORDERED.test(line)) {
        var ordered = !BULLET.test(line), pattern = ordered ? ORDERED : BULLET, items = [];
        var start = ordered ? Number(ORDERED.exec(line)[1]) : 1;
        while (i < lines.length && (m = pattern.exec(lines[i]))) {
          var item = [ordered ? m[2] : m[1]];
          // Indented lines continue the item.
          for (i++; i < lines.length && /^\s{2,}\S/.test(lines[i]) && !pattern.test(lines[i]); i++) item.push(lines[i].trim());
          items.push("<li>" + item.map(function (t) { return inline(escapeHtml(t), cite); }).join("<br>") + "</li>");
        }
        var open = ordered ? (start !== 1 ? '<ol start="' + start + '">' : "<ol>") : "<ul>";
        out.push(open + items.join("") + (ordered ? "</ol>" : "</ul>"));
        continue;
      }
      if (QUOTE.test(line)) {
        buffer = [];
        while (i < lines.length && (m = QUOTE.exec(lines[i]))) { buffer.push(m[1]); i++; }
        out.push("<blockquote>" + (depth < 4 ? blocks(buffer, cite, depth + 1, highlight) : "<p>" + escapeHtml(buffer.join(" ")) + "</p>") + "</blockquote>");
        continue;
      }
      buffer = [line];
      for (i++; i < lines.length && !BLANK.test(lines[i]) && !startsBlock(lines[i]) && !isTableStart(lines, i); i++) buffer.push(lines[i]);
      out.push("<p>" + buffer.map(function (t) { return inline(escapeHtml(t.trim()), cite); }).join("<br>") + "</p>");
    }
    return out.join("");
  }

  function render(text, options) {
    var cite = (options && options.cite) || function () { return false; };
    var highlight = (options && options.highlight) || null;
    // The placeholders cannot come from the input.
    var clean = String(text == null ? "" : text).replace(/[\u0000\u0001]/g, "\uFFFD").replace(/\r\n?/g, "\n");
    return blocks(clean.split("\n"), cite, 0, highlight);
  }

  global.QuarryMarkdown = { render: render, escapeHtml: escapeHtml };
})(window);
