// The page's logic: ask POST /route for the probabilities at once, then stream the answer from
// POST /v1/chat/completions (the model name picks the route), showing each LLM call as a
// progress line, then the answer, its numbered sources, the cost and, on the logic route, the DAG.
"use strict";

const $ = id => document.getElementById(id);
const KEY_STORE = "logicroute-key";

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = $("api-key").value.trim();
  if (key) h.Authorization = "Bearer " + key;
  return h;
}

async function errorOf(resp) {
  try {
    const body = await resp.json();
    return (body.error && body.error.message) || resp.statusText;
  } catch (e) {
    return resp.status + " " + resp.statusText;
  }
}

async function post(path, body) {
  const resp = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
  if (resp.status === 401) $("key-box").open = true;
  if (!resp.ok) throw new Error(await errorOf(resp));
  return resp;
}

function show(id, visible) { $(id).hidden = !visible; }

function clear() {
  for (const id of ["probs", "progress", "answer", "cost", "flags", "sources", "dag", "dag-nodes", "decision"]) {
    $(id).textContent = "";
  }
  for (const id of ["probs-box", "progress-box", "answer-box", "dag-box", "error"]) show(id, false);
}

function showProbs(decision) {
  const box = $("probs");
  box.textContent = "";
  for (const [route, p] of Object.entries(decision.probs)) {
    const row = document.createElement("div");
    row.className = "prob" + (route === decision.route ? " chosen" : "");
    row.dataset.route = route;
    row.innerHTML = `<span>${route}</span><span class="bar"><span style="width:${(100 * p).toFixed(1)}%"></span></span>` +
      `<span>${(100 * p).toFixed(1)}%</span>`;
    box.appendChild(row);
  }
  const far = decision.ood && decision.ood.far ? " · far from the router's training questions" : "";
  $("decision").textContent = `router: ${decision.route} (${decision.policy})${far}`;
  show("probs-box", true);
}

function progressLine(ev) {
  if (ev.type !== "step_done") return;
  const li = document.createElement("li");
  li.textContent = `${ev.step}: ${ev.prompt_tokens}+${ev.completion_tokens} tokens, ${ev.seconds}s` +
    (ev.cached ? " (cached)" : "");
  $("progress").appendChild(li);
  show("progress-box", true);
}

function sourceLabel(s) {
  const where = s.path || s.title || s.doc_id;
  return s.heading_path ? `${where} > ${s.heading_path}` : where;
}

// The answer's text with each [n] linked to source n.
function renderAnswer(text) {
  const p = $("answer");
  p.textContent = "";
  for (const part of text.split(/(\[\d+\])/)) {
    const m = part.match(/^\[(\d+)\]$/);
    if (m) {
      const a = document.createElement("a");
      a.href = "#source-" + m[1];
      a.className = "cite";
      a.textContent = part;
      p.appendChild(a);
    } else {
      p.appendChild(document.createTextNode(part));
    }
  }
}

function renderSources(sources) {
  const ol = $("sources");
  sources.forEach(s => {
    const li = document.createElement("li");
    if (s.n !== null && s.n !== undefined) { li.value = s.n; li.id = "source-" + s.n; } else li.className = "unnumbered";
    const where = document.createElement("span");
    where.className = "where";
    where.textContent = sourceLabel(s) + `  (score ${s.score.toFixed(2)})` +
      (s.used_by && s.used_by.length ? `  · used by ${s.used_by.join(", ")}` : "");
    const text = document.createElement("span");
    text.className = "text";
    text.textContent = s.text.length > 280 ? s.text.slice(0, 279) + "…" : s.text;
    li.append(where, text);
    ol.appendChild(li);
  });
}

function renderDag(result) {
  const dag = result.dag;
  if (!dag) return;
  window.drawDag(dag, $("dag"), result.answer);
  const ol = $("dag-nodes");
  for (const n of dag.nodes) {
    const li = document.createElement("li");
    li.dataset.node = n.id;
    const refs = n.sources.map(i => result.sources[i]).filter(Boolean)
      .map(s => (s.n ? `[${s.n}] ` : "") + sourceLabel(s));
    li.innerHTML = `<b></b> <span class="q"></span> → <span class="sub-answer"></span><br><span class="muted"></span>`;
    li.querySelector("b").textContent = n.id + (n.origin === "reflection" ? " (added by reflection)" : "");
    li.querySelector(".q").textContent = n.question;
    li.querySelector(".sub-answer").textContent = n.answer || "(not solved)";
    li.querySelector(".muted").textContent = refs.length ? "sources: " + refs.join("; ") : "no sources";
    ol.appendChild(li);
  }
  show("dag-box", true);
}

function renderResult(result) {
  renderAnswer(result.answer);
  $("route-taken").textContent = result.route;
  const u = result.usage;
  $("cost").textContent = `cost: ${u.llm_calls} LLM calls, ${u.prompt_tokens}+${u.completion_tokens} tokens, ` +
    `${u.seconds.toFixed(2)}s` + (u.cached_calls ? ` (${u.cached_calls} cached)` : "");
  for (const f of result.flags) {
    const li = document.createElement("li");
    li.textContent = f;
    $("flags").appendChild(li);
  }
  renderSources(result.sources);
  show("answer-box", true);
  renderDag(result);
}

// Reads the server-sent events of a streamed chat completion; returns its `logicroute` object.
async function readStream(resp) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "", result = null, text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const data = event.split("\n").filter(l => l.startsWith("data: ")).map(l => l.slice(6)).join("\n");
      if (!data || data === "[DONE]") continue;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.logicroute && chunk.logicroute.progress) progressLine(chunk.logicroute.progress);
      for (const c of chunk.choices || []) {
        if (c.delta && c.delta.content) { text += c.delta.content; $("answer").textContent = text; show("answer-box", true); }
      }
      if (chunk.choices && chunk.choices[0] && chunk.choices[0].finish_reason) result = chunk.logicroute;
    }
  }
  if (!result) throw new Error("the stream ended without an answer");
  return result;
}

async function ask(event) {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question) return;
  const route = $("route").value, style = $("style").value;
  sessionStorage.setItem(KEY_STORE, $("api-key").value);
  clear();
  $("ask").disabled = true;
  try {
    showProbs(await (await post("/route", { question })).json());
    const body = { model: "logicroute-" + route, stream: true, messages: [{ role: "user", content: question }] };
    if (style) body.logicroute = { style };
    renderResult(await readStream(await post("/v1/chat/completions", body)));
    document.body.dataset.state = "answered";
  } catch (e) {
    $("error").textContent = e.message;
    show("error", true);
    document.body.dataset.state = "error";
  } finally {
    $("ask").disabled = false;
  }
}

async function health() {
  try {
    const resp = await fetch("/health", { headers: headers() });
    if (resp.status === 401) { $("health").textContent = "API key needed"; $("key-box").open = true; return; }
    const h = await resp.json();
    $("health").textContent = `${h.kb.documents} documents, ${h.kb.chunks} chunks · ${h.llm}`;
  } catch (e) {
    $("health").textContent = "server unreachable";
  }
}

$("api-key").value = sessionStorage.getItem(KEY_STORE) || "";
$("api-key").addEventListener("change", health);
$("ask-form").addEventListener("submit", ask);
health();
