/* Quarry's graph picture: how passages connect through the entities they mention, as SVG.
 *
 * No build step and nothing inline (the pages' CSP): the data comes from a JSON block
 * (<script type="application/json">, on the document page) or from POST /v1/graph/picture
 * (the chat's sources panel), in the shape {passages: [{chunk_id, document_id, title, focus}],
 * entities: [{id, name, type}], links: [{chunk_id, entity}]}. Passages are drawn on the
 * left, entities on the right, a line for every mention. The text list beside the picture
 * says the same for anyone who does not see it.
 *
 *   QuarryGraph.draw(figure, picture, {label: function (passage, index) -> string, href: function (passage) -> url,
 *                                      describe: false to leave out the text list, empty: sentence when nothing connects})
 */
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";
  var ROW = 30;
  var WIDTH = 460;   // room for an 18-character label (11px) on either side of the links
  var LABEL = 150;   // from each edge to its column of dots

  function svg(name, attributes, text) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attributes || {}).forEach(function (key) { node.setAttribute(key, attributes[key]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function cut(text, size) {
    text = String(text || "");
    return text.length > size ? text.slice(0, size - 1) + "…" : text;
  }

  /* The text fallback: one item per entity, naming the passages that mention it. */
  function describe(picture, label) {
    var list = document.createElement("ul");
    list.className = "graph-text";
    var byId = {};
    picture.passages.forEach(function (p, i) { byId[p.chunk_id] = label(p, i); });
    picture.entities.forEach(function (entity) {
      var names = picture.links.filter(function (l) { return l.entity === entity.id; })
        .map(function (l) { return byId[l.chunk_id]; }).filter(Boolean);
      var item = document.createElement("li");
      item.textContent = entity.name + " (" + entity.type + "): " + names.join(", ");
      list.append(item);
    });
    return list;
  }

  function draw(figure, picture, options) {
    options = options || {};
    var label = options.label || function (p) { return p.title || p.document_id; };
    var href = options.href || null;
    figure.replaceChildren();
    if (!picture || !picture.entities || !picture.entities.length) {
      var none = document.createElement("p");
      none.className = "hint graph-empty";
      none.textContent = options.empty || "These passages share no entity in the knowledge graph.";
      figure.append(none);
      return;
    }
    var rows = Math.max(picture.passages.length, picture.entities.length);
    var height = rows * ROW + 10;
    var passageX = LABEL, entityX = WIDTH - LABEL;
    var picture_ = svg("svg", {
      "class": "graph-svg", viewBox: "0 0 " + WIDTH + " " + height, role: "img",
      "aria-label": "How the passages connect through " + picture.entities.length + " entities",
    });
    function y(index, count) { return 5 + (index + 0.5) * (rows * ROW) / count; }
    var passageY = {}, entityY = {};
    picture.passages.forEach(function (p, i) { passageY[p.chunk_id] = y(i, picture.passages.length); });
    picture.entities.forEach(function (e, i) { entityY[e.id] = y(i, picture.entities.length); });
    var lines = svg("g", { "class": "graph-links" });
    picture.links.forEach(function (link) {
      if (!(link.chunk_id in passageY) || !(link.entity in entityY)) return;
      lines.append(svg("line", { x1: passageX, y1: passageY[link.chunk_id], x2: entityX, y2: entityY[link.entity],
                                 "data-chunk": link.chunk_id, "data-entity": link.entity }));
    });
    picture_.append(lines);
    picture.passages.forEach(function (p, i) {
      var group = svg("g", { "class": "graph-passage" + (p.focus ? " graph-focus" : ""), "data-chunk": p.chunk_id });
      group.append(svg("circle", { cx: passageX, cy: passageY[p.chunk_id], r: 6 }));
      var text = svg("text", { x: passageX - 10, y: passageY[p.chunk_id] + 4, "text-anchor": "end" }, cut(label(p, i), 18));
      text.append(svg("title", {}, label(p, i) + " — " + (p.title || p.document_id)));
      if (href) {
        var a = svg("a", { href: href(p) });
        a.append(text);
        group.append(a);
      } else {
        group.append(text);
      }
      picture_.append(group);
    });
    picture.entities.forEach(function (e) {
      var group = svg("g", { "class": "graph-entity graph-type-" + String(e.type).replace(/[^a-z-]/g, ""), "data-entity": e.id });
      group.append(svg("rect", { x: entityX - 5, y: entityY[e.id] - 5, width: 10, height: 10, rx: 2 }));
      var text = svg("text", { x: entityX + 10, y: entityY[e.id] + 4 }, cut(e.name, 18));
      text.append(svg("title", {}, e.name + " (" + e.type + ")"));
      group.append(text);
      picture_.append(group);
    });
    figure.append(picture_);
    fit(picture_);
    if (options.describe !== false) figure.append(describe(picture, label));
  }

  /* Frame the drawing by what was drawn: labels wider than their column (wide letters) are never
     clipped, and the picture shows at its own size (11px text), shrinking only on narrow screens.
     A picture drawn while hidden measures nothing and keeps the fixed frame. */
  function fit(picture) {
    var box;
    try { box = picture.getBBox(); } catch (e) { return; }
    if (!box || !box.width || !box.height) return;
    var x = Math.floor(box.x) - 4, y = Math.floor(box.y) - 4, w = Math.ceil(box.width) + 8, h = Math.ceil(box.height) + 8;
    picture.setAttribute("viewBox", [x, y, w, h].join(" "));
    picture.setAttribute("width", String(w));
    picture.setAttribute("height", String(h));
  }

  /* Pages that ship their picture as JSON: <figure data-graph-picture="id of the JSON block">. */
  function drawEmbedded() {
    document.querySelectorAll("figure[data-graph-picture]").forEach(function (figure) {
      var source = document.getElementById(figure.getAttribute("data-graph-picture"));
      if (!source) return;
      var picture;
      try { picture = JSON.parse(source.textContent); } catch (e) { return; }
      var tenant = figure.getAttribute("data-tenant") || "";
      draw(figure.querySelector(".graph-canvas") || figure, picture, {
        label: function (p) { return p.title || p.document_id; },
        href: function (p) {
          return "/documents/" + p.document_id.split("/").map(encodeURIComponent).join("/") +
            "?chunk=" + encodeURIComponent(p.chunk_id) + (tenant ? "&tenant=" + encodeURIComponent(tenant) : "") + "#passage";
        },
        empty: "This passage names no entity that other documents mention.",
        describe: false,  // the page's own list (server-rendered) is the text version
      });
      figure.classList.add("graph-drawn");
    });
  }

  window.QuarryGraph = { draw: draw };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", drawEmbedded);
  else drawEmbedded();
})();
