// Draws the logic route's DAG as inline SVG: the question on top, one row per topological
// rank (sub-questions of a rank are solved together), the answer at the bottom; an arrow
// from each sub-question to those that depend on it. No library: the page has no build step
// and the machine may have no internet.
"use strict";

(function () {
  const SVG = "http://www.w3.org/2000/svg";
  const BOX_W = 260, LINE_H = 15, PAD = 8, GAP_X = 24, GAP_Y = 42, CHARS = 38, MAX_LINES = 4;

  function el(name, attrs, parent) {
    const e = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (parent) parent.appendChild(e);
    return e;
  }

  // Greedy word wrap into at most maxLines lines of `chars` characters.
  function wrap(text, maxLines, chars = CHARS) {
    const words = String(text || "").split(/\s+/).filter(Boolean);
    const lines = [];
    let line = "";
    for (const w of words) {
      if ((line + " " + w).trim().length > chars && line) { lines.push(line); line = w; }
      else line = (line + " " + w).trim();
    }
    if (line) lines.push(line);
    if (lines.length > maxLines) {
      lines.length = maxLines;
      lines[maxLines - 1] = lines[maxLines - 1].slice(0, chars - 1) + "…";
    }
    return lines;
  }

  // One box: its lines of text (the question, then "→ answer"), its size and kind.
  function box(id, kind, question, answer) {
    const q = wrap(question, MAX_LINES);
    const a = answer ? wrap("→ " + answer, 2, CHARS - 6) : [];  // bold: fewer characters fit
    return { id, kind, q, a, w: BOX_W, h: PAD * 2 + LINE_H * (q.length + a.length) };
  }

  function layout(dag) {
    const rows = [[box("Q", "root", dag.question || "question", null)]];
    const byRank = new Map();
    for (const n of dag.nodes) {
      const r = Number(n.rank || 0);
      if (!byRank.has(r)) byRank.set(r, []);
      byRank.get(r).push(box(n.id, n.origin === "reflection" ? "reflection" : "sub",
        n.id + ": " + n.question, n.answer));
    }
    [...byRank.keys()].sort((a, b) => a - b).forEach(r => rows.push(byRank.get(r)));
    rows.push([box("A", "final", "answer", dag.answer || null)]);
    const width = Math.max(...rows.map(r => r.length * BOX_W + (r.length - 1) * GAP_X)) + 2 * GAP_X;
    let y = GAP_X;
    const at = {};
    for (const row of rows) {
      const rowW = row.length * BOX_W + (row.length - 1) * GAP_X;
      let x = (width - rowW) / 2;
      const rowH = Math.max(...row.map(b => b.h));
      for (const b of row) { b.x = x; b.y = y; at[b.id] = b; x += BOX_W + GAP_X; }
      y += rowH + GAP_Y;
    }
    return { rows, at, width, height: y - GAP_Y + GAP_X };
  }

  function edgesOf(dag) {
    const ids = dag.nodes.map(n => n.id);
    const edges = (dag.edges || []).map(([u, v]) => [u, v]);
    const hasParent = new Set(edges.map(e => e[1]));
    const hasChild = new Set(edges.map(e => e[0]));
    ids.filter(i => !hasParent.has(i)).forEach(i => edges.push(["Q", i]));
    ids.filter(i => !hasChild.has(i)).forEach(i => edges.push([i, "A"]));
    return edges;
  }

  function drawBox(svg, b) {
    const g = el("g", { class: "node " + b.kind, "data-node": b.id, transform: `translate(${b.x},${b.y})` }, svg);
    el("rect", { width: b.w, height: b.h, rx: 6 }, g);
    let y = PAD + LINE_H - 3;
    for (const line of b.q) { el("text", { x: PAD, y }, g).textContent = line; y += LINE_H; }
    for (const line of b.a) { el("text", { x: PAD, y, class: "answer" }, g).textContent = line; y += LINE_H; }
  }

  window.drawDag = function (dag, container, finalAnswer) {
    container.textContent = "";
    const { at, rows, width, height } = layout({ ...dag, answer: finalAnswer });
    const svg = el("svg", { viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": "reasoning DAG" });
    const defs = el("defs", {}, svg);
    const marker = el("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
      markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, defs);
    el("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#98a2b3" }, marker);
    for (const [u, v] of edgesOf(dag)) {
      const a = at[u], b = at[v];
      if (!a || !b) continue;
      const x1 = a.x + a.w / 2, y1 = a.y + a.h, x2 = b.x + b.w / 2, y2 = b.y, my = (y1 + y2) / 2;
      el("path", { class: "edge", d: `M ${x1} ${y1} C ${x1} ${my}, ${x2} ${my}, ${x2} ${y2}` }, svg);
    }
    rows.flat().forEach(b => drawBox(svg, b));
    container.appendChild(svg);
  };
})();
