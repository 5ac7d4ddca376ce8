"""Router labels: for each question, how well and at what cost each route does, and the
preference vector the router is trained against.

Scorers
- ``answer``: run every route with the LLM, score its answer against the gold answers
  (F1 by default; EM or LogicRAG's string accuracy selectable) and record its cost (LLM calls,
  tokens, seconds). Faithful but slow: several LLM calls per question.
- ``retrieval`` (LLM-free): score the context each route would hand the LLM:
    * share of the question's gold supporting passages found in it (recall by passage id;
      for summary, a passage also counts when the context quotes one of its sentences of
      6+ words verbatim, since the extractive summaries hand the LLM that evidence);
    * when the data mark no supporting passage: 1.0 if a gold answer string occurs in it.
  Contexts:
    * chunk   = top-k search on the question (k=3, as the chunk route does);
    * summary = `engine.routes.summary.summary_context(question, kb, k=k)`;
    * logic   = a proxy of the DAG's retrieval: top-k for the question, then a second hop
      whose query is the question + up to 8 entity-like spans of the first hits' texts that
      the question does not name (the bridge entities a sub-question would carry once the
      first hop is answered), searched with the first hits excluded (LogicRAG's sampling
      without replacement); context = the union (2k chunks). Supporting recall measured
      (first 400 questions, KB = their passages): HotpotQA top-3 0.68, this proxy 0.80,
      titles-only second hop 0.77, plain top-6 0.80; 2Wiki top-3 0.61, this proxy 0.74,
      titles-only 0.64, plain top-6 0.66: the bridge entities, not the extra width, help.
  Because the logic context is a superset of the chunk context, logic can only tie or win on
  score; the cost term below is what sends a question to chunk when the second hop adds
  nothing. Costs here are nominal tokens per route (router.policy.NOMINAL_TOKENS) plus the
  measured context size.

Preference vector: pref = softmax((score - lam * cost / max_cost) / tau) over the routes,
cost = tokens (measured for ``answer``, nominal for ``retrieval``). The oracle route is the
argmax of pref; ties go to the cheaper route. Rows where every route scores 0 are kept and
marked ``all_zero``: no route helps, so training targets the cheapest route for them
(training.train, option all_zero="cheapest"), rather than learning noise.

Label files are JSONL, one row per question, appended and flushed row by row; a rerun skips
rows already present, so an interrupted run resumes without duplicates.
"""
from __future__ import annotations

import json
import math
import os
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

import numpy as np

from engine.errors import LogicRouteError

if TYPE_CHECKING:
    from training.data import Question

DEFAULT_ROUTES = ("chunk", "summary", "logic")
SCORERS = ("answer", "retrieval")
PREFETCH_BLOCK = 64  # questions whose embeddings are computed in one batch (retrieval scorer)
METRICS = ("f1", "em", "acc")


@dataclass
class LabelConfig:
    """How labels are made; every field lands in each row (so mixed files are detected)."""

    scorer: str = field(default="retrieval", metadata={"help": "answer (run routes with the LLM) | retrieval (LLM-free)"})
    routes: tuple[str, ...] = field(default=DEFAULT_ROUTES, metadata={"help": "routes to score, cheapest first"})
    metric: str = field(default="f1", metadata={"help": "answer scorer metric: f1 | em | acc (string accuracy)"})
    k: int = field(default=3, metadata={"help": "chunks per retrieval (LogicRAG and the chunk route use 3)"})
    lam: float = field(default=0.1, metadata={"help": "cost weight in the preference: score - lam * cost/max_cost"})
    tau: float = field(default=0.1, metadata={"help": "softmax temperature of the preference vector"})
    llm: str | None = field(default=None, metadata={"help": "LLM spec used by the answer scorer (None for retrieval)"})


# ---------------------------------------------------------------- preference vectors

def route_cost(cost: dict) -> float:
    """The scalar cost a preference uses: tokens (measured, else the nominal estimate)."""
    for key in ("tokens", "tokens_est"):
        if key in cost and cost[key] is not None:
            return float(cost[key])
    return float(cost.get("llm_calls", 0.0))


def preference(scores: dict[str, float], costs: dict[str, float], lam: float, tau: float) -> dict[str, float]:
    """softmax((score - lam * cost / max_cost) / tau), in the order of `scores`."""
    top = max(costs.values()) or 1.0
    utils = {r: scores[r] - lam * costs[r] / top for r in scores}
    m = max(utils.values())
    ex = {r: math.exp((u - m) / tau) for r, u in utils.items()}
    z = sum(ex.values())
    return {r: v / z for r, v in ex.items()}


def oracle_route(pref: dict[str, float], costs: dict[str, float], eps: float = 1e-9) -> str:
    """Argmax of the preference; among (near-)ties the cheaper route, then the earlier one."""
    best = max(pref.values())
    tied = [r for r in pref if pref[r] >= best - eps]
    return min(tied, key=lambda r: (costs.get(r, 0.0), list(pref).index(r)))


def cheapest_route(costs: dict[str, float]) -> str:
    return min(costs, key=lambda r: (costs[r], list(costs).index(r)))


def make_row(q: "Question", scores: dict[str, float], costs: dict[str, dict], cfg: LabelConfig,
             index: int | None = None, extra: dict | None = None) -> dict:
    scal = {r: route_cost(costs[r]) for r in scores}
    pref = preference(scores, scal, cfg.lam, cfg.tau)
    row = {
        "id": q.id,
        "dataset": q.dataset,
        "index": index,
        "question": q.text,
        "type": q.type,
        "answers": q.answers,
        "scores": {r: round(float(s), 4) for r, s in scores.items()},
        "costs": costs,
        "pref": {r: round(p, 6) for r, p in pref.items()},
        "oracle": oracle_route(pref, scal),
        "all_zero": max(scores.values()) <= 1e-9,
        "scorer": cfg.scorer,
        "metric": cfg.metric if cfg.scorer == "answer" else "support_recall",
        "llm": cfg.llm,
        "lam": cfg.lam,
        "tau": cfg.tau,
        "k": cfg.k,
    }
    if extra:
        row.update(extra)
    return row


# ---------------------------------------------------------------- retrieval scorer

def _norm(s: str) -> str:
    from training.metrics import normalize_answer

    return normalize_answer(s)


def context_of(items) -> tuple[list[str], str, int]:
    """(doc ids, text, n items) of a context: a list of RetrievedChunk-like objects, a
    (list, info) pair as summary_context returns, or a plain string. Summaries carry no
    doc id (doc_id "")."""
    if isinstance(items, str):
        return [], items, 1
    if isinstance(items, tuple) and len(items) == 2 and isinstance(items[1], (dict, str)):
        ids, text, n = context_of(items[0])
        return ids, (text + "\n" + items[1]) if isinstance(items[1], str) else text, n
    ids, texts = [], []
    for c in items or []:
        get = c.get if isinstance(c, dict) else (lambda key, _c=c: getattr(_c, key, None))
        if get("doc_id"):
            ids.append(str(get("doc_id")))
        texts.append(f"{get('title') or ''}: {get('text') or ''}")
    return ids, "\n".join(texts), len(texts)


_SENT = re.compile(r"(?<=[.!?])\s+")


def _quoted_in(doc_text: str, context: str, min_words: int = 6) -> bool:
    """True when a sentence of the document (>= min_words words) occurs verbatim in the
    context: an extractive summary that quotes the passage hands the LLM that evidence."""
    return any(len(s.split()) >= min_words and s in context
               for s in (" ".join(x.split()) for x in _SENT.split(doc_text)))


def support_score(q: "Question", doc_ids: Iterable[str], text: str, kb=None) -> float:
    """Recall of gold supporting passages; when none are marked, gold answer in the text.

    A supporting passage counts when one of its chunks is in the context, or (with kb) when
    the context quotes one of its sentences verbatim (summary layers are extractive)."""
    if q.supporting:
        have = set(doc_ids)
        flat = " ".join(text.split()) if kb is not None else ""
        found = 0
        for s in q.supporting:
            if s in have:
                found += 1
            elif kb is not None and flat and hasattr(kb, "chunks_of"):
                found += any(_quoted_in(c.text, flat) for c in kb.chunks_of(s))
        return found / len(q.supporting)
    t = _norm(text)
    return float(any(g and _norm(g) and _norm(g) in t for g in q.answers))


HOP_ENTITIES = 8  # bridge-entity candidates appended to the second-hop query


def hop_query(question: str, first: Sequence) -> str:
    """The second-hop query: the question + up to HOP_ENTITIES entity-like spans
    (capitalized runs) of the first hits' texts that the question does not name yet: the
    bridge entities a LogicRAG sub-question would carry once the first hop is answered."""
    from router.features import _SPAN

    low = question.lower()
    spans: list[str] = []
    for c in first:
        for m in _SPAN.findall(c.text or ""):
            m = m.strip()
            if len(m) > 2 and m.lower() not in low and m not in spans:
                spans.append(m)
    return (question + " " + " ".join(spans[:HOP_ENTITIES])).strip()


def logic_proxy_context(question: str, kb, k: int = 3, vectors: dict | None = None) -> list:
    """Two-hop retrieval standing in for the DAG (see module doc). `vectors` maps query
    texts to precomputed embeddings (label_questions batches them)."""
    vec = (vectors or {}).get
    first = kb.search(_q(vec, question), k=k)
    hop = hop_query(question, first)
    second = kb.search(_q(vec, hop), k=k, exclude={c.chunk_id for c in first})
    return list(first) + list(second)


def _q(vec, text: str):
    v = vec(text)
    return text if v is None else v


def retrieval_contexts(question: str, kb, routes: Sequence[str], k: int = 3,
                       vectors: dict | None = None) -> dict[str, tuple[list, float]]:
    """route -> (context, seconds) for the LLM-free scorer. The question is whitespace-
    normalized as the routes do (check_question)."""
    question = " ".join(question.split())
    vec = (vectors or {}).get
    out = {}
    for r in routes:
        t0 = time.perf_counter()
        if r == "chunk":
            ctx = kb.search(_q(vec, question), k=k)
        elif r == "logic":
            ctx = logic_proxy_context(question, kb, k=k, vectors=vectors)
        elif r == "summary":
            from engine.routes.summary import summary_context

            ctx = summary_context(question, kb, k=k, query_vector=vec(question))
        else:
            raise LogicRouteError(f"the retrieval scorer knows no route {r!r} (chunk, summary, logic)")
        out[r] = (ctx, time.perf_counter() - t0)
    return out


def prefetch_vectors(questions: Sequence["Question"], kb, k: int = 3) -> dict:
    """Embed a block of questions and their second-hop queries in two batched calls:
    one-by-one encodes cost ~20x more on a busy CPU. {} when the KB has no embedder."""
    emb = getattr(kb, "embedder", None)
    if emb is None or not questions:
        return {}
    texts = [" ".join(q.text.split()) for q in questions]
    qv = np.asarray(emb.encode(texts), dtype=np.float32)
    vectors = dict(zip(texts, qv))
    hops = [hop_query(t, kb.search(v, k=k)) for t, v in zip(texts, qv)]
    hops = [h for h in dict.fromkeys(hops) if h not in vectors]
    if hops:
        vectors.update(zip(hops, np.asarray(emb.encode(hops), dtype=np.float32)))
    return vectors


def score_retrieval(q: "Question", kb, cfg: LabelConfig, vectors: dict | None = None
                    ) -> tuple[dict[str, float], dict[str, dict]]:
    from router.policy import NOMINAL_TOKENS

    scores, costs = {}, {}
    for r, (ctx, secs) in retrieval_contexts(q.text, kb, cfg.routes, cfg.k, vectors).items():
        ids, text, n = context_of(ctx)
        scores[r] = support_score(q, ids, text, kb if r == "summary" else None)
        costs[r] = {
            "tokens_est": NOMINAL_TOKENS.get(r, NOMINAL_TOKENS["logic"]),
            "context_words": len(text.split()),
            "retrieved": n,
            "seconds": round(secs, 4),  # search only: the embeddings are batched beforehand
        }
    return scores, costs


# ---------------------------------------------------------------- answer scorer

def _metric_fn(name: str) -> Callable[[str, list[str]], float]:
    from training.metrics import exact_match, f1, string_acc

    try:
        return {"f1": f1, "em": exact_match, "acc": string_acc}[name]
    except KeyError:
        raise LogicRouteError(f"unknown metric {name!r}: choose {', '.join(METRICS)}") from None


def run_route(route: str, question: str, kb, llm, k: int = 3):
    if route == "chunk":
        from engine.routes.chunk import answer_chunk

        return answer_chunk(question, kb, llm, k=k)
    if route == "summary":
        from engine.routes.summary import answer_summary

        return answer_summary(question, kb, llm, k=k)
    if route == "logic":
        from engine.routes.logic import LogicConfig, answer_logic

        return answer_logic(question, kb, llm, LogicConfig(k=k))
    raise LogicRouteError(f"unknown route {route!r} (chunk, summary, logic)")


def score_answer(q: "Question", kb, llm, cfg: LabelConfig,
                 runner: Callable = run_route) -> tuple[dict[str, float], dict[str, dict], dict]:
    """Run each route; a route that fails scores 0 and its error is kept in the row."""
    metric = _metric_fn(cfg.metric)
    scores, costs, extra = {}, {}, {"answers_pred": {}, "errors": {}}
    for r in cfg.routes:
        t0 = time.perf_counter()
        try:
            ans = runner(r, q.text, kb, llm, cfg.k)
        except LogicRouteError as e:
            scores[r] = 0.0
            costs[r] = {"llm_calls": 0, "tokens": 0, "seconds": round(time.perf_counter() - t0, 3)}
            extra["errors"][r] = f"{type(e).__name__}: {e}"
            continue
        u = ans.usage
        scores[r] = metric(ans.text, q.answers)
        costs[r] = {"llm_calls": u.llm_calls, "tokens": u.total_tokens, "prompt_tokens": u.prompt_tokens,
                    "completion_tokens": u.completion_tokens, "cached_calls": u.cached_calls,
                    "seconds": round(u.seconds or (time.perf_counter() - t0), 3)}
        extra["answers_pred"][r] = ans.text
    if not extra["errors"]:
        del extra["errors"]
    return scores, costs, extra


# ---------------------------------------------------------------- files

def row_key(row: dict) -> str:
    return f"{row.get('dataset')}:{row.get('id')}"


def read_labels(path: str | Path, *, repair: bool = False) -> list[dict]:
    """Rows of a label file. A torn last line (an interrupted write) is ignored, and with
    repair=True cut off, so appends start on a clean line; a bad line elsewhere is an error
    naming the line."""
    from engine.errors import DataFormatError

    path = Path(path)
    if not path.exists():
        return []
    raw = path.read_bytes()
    pieces = raw.split(b"\n")  # ends with b"" when the file ends with a newline
    last = max(i for i, p in enumerate(pieces) if p.strip()) if raw.strip() else -1
    rows, pos, good_end = [], 0, 0
    for i, line in enumerate(pieces):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError:
                if i == last:
                    break  # the torn last row of an interrupted run
                raise DataFormatError(f"{path}:{i + 1}: malformed label row") from None
        pos += len(line) + 1
        good_end = min(pos, len(raw))
    if repair:
        if good_end < len(raw):
            with open(path, "r+b") as f:
                f.truncate(good_end)
        elif raw and not raw.endswith(b"\n"):
            with open(path, "ab") as f:
                f.write(b"\n")
    return rows


def select_questions(data: str | Path, n: int | None = None, offset: int = 0, stride: int = 1):
    """(questions, dataset): questions offset, offset+stride, ... (n of them). The dataset's
    passages are those of every question in the span read (stride 1: the questions taken)."""
    from training.data import load_dataset

    if stride < 1:
        raise LogicRouteError(f"stride must be >= 1, got {stride}")
    span = None if n is None else n * stride
    ds = load_dataset(data, n=span, offset=offset)
    qs = ds.questions[::stride]
    return (qs if n is None else qs[:n]), ds


def check_kb_matches(questions: Sequence["Question"], kb) -> None:
    """Supporting-passage recall needs KB doc ids = passage ids: refuse a KB built otherwise."""
    sup = {s for q in questions for s in q.supporting}
    if not sup:
        return
    have = set(kb.doc_ids) if hasattr(kb, "doc_ids") else {c.doc_id for c in kb.chunks.values()}
    share = len(sup & have) / len(sup)
    if share < 0.5:
        raise LogicRouteError(
            f"only {share:.0%} of the questions' supporting passages are documents of the KB at "
            f"{getattr(kb, 'path', '?')}: build the KB from this data file (label --build-kb, or "
            "`logicroute index DATA --kb DIR`)")


def label_questions(questions: Sequence["Question"], kb, out: str | Path, cfg: LabelConfig, *,
                    llm=None, runner: Callable = run_route, progress: bool = True,
                    indices: Sequence[int] | None = None) -> dict:
    """Label questions into `out` (JSONL), skipping rows already there. Returns counts."""
    if cfg.scorer not in SCORERS:
        raise LogicRouteError(f"unknown scorer {cfg.scorer!r}: choose {', '.join(SCORERS)}")
    if cfg.scorer == "answer" and llm is None:
        raise LogicRouteError("the answer scorer needs an LLM")
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    existing = read_labels(out, repair=True)
    for r in existing[:1]:
        if r.get("scorer") != cfg.scorer or tuple(r.get("scores", {})) != tuple(cfg.routes):
            raise LogicRouteError(
                f"{out} holds {r.get('scorer')} labels for routes {list(r.get('scores', {}))}; "
                f"this run makes {cfg.scorer} labels for {list(cfg.routes)}: use another --out")
    done = {row_key(r) for r in existing}
    todo = [(i, q) for i, q in zip(indices or range(len(questions)), questions)
            if f"{q.dataset}:{q.id}" not in done]
    if cfg.scorer == "retrieval":
        check_kb_matches(questions, kb)
    from tqdm import tqdm

    written = zero = 0
    bar = tqdm(total=len(todo), desc=f"labels {cfg.scorer}", unit="q", file=sys.stderr, disable=not progress)
    vectors: dict = {}
    with open(out, "a", encoding="utf-8") as f:
        for j, (i, q) in enumerate(todo):
            if cfg.scorer == "retrieval":
                if j % PREFETCH_BLOCK == 0:
                    vectors = prefetch_vectors([x for _, x in todo[j: j + PREFETCH_BLOCK]], kb, cfg.k)
                scores, costs = score_retrieval(q, kb, cfg, vectors)
                extra = None
            else:
                scores, costs, extra = score_answer(q, kb, llm, cfg, runner)
            row = make_row(q, scores, costs, cfg, index=i, extra=extra)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            f.flush()  # row by row: an interruption loses at most the row being written
            if written % 50 == 0:
                os.fsync(f.fileno())
            written += 1
            zero += row["all_zero"]
            bar.update(1)
    bar.close()
    return {"written": written, "skipped": len(questions) - len(todo), "all_zero": zero, "out": str(out)}


def build_kb_for(ds, kb_dir: str | Path, embedder=None, *, summaries: bool = False, progress: bool = True):
    """A KB whose documents are the dataset's passages (doc id = passage id)."""
    from hierarchy.documents import Document
    from hierarchy.kb import KnowledgeBase

    kb = KnowledgeBase.create(kb_dir, embedder)
    kb.add([Document(id=p.id, title=p.title, text=p.text) for p in ds.passages], show_progress=progress)
    if summaries:
        from hierarchy.layers import build_layers

        build_layers(kb, summarizer="extractive", llm=None, show_progress=progress)
    return kb
