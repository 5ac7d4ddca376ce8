"""How each route does on one question: the two scorers behind router labels.

- ``answer``: run every route with the LLM (engine.core.routes.answer_on), score its answer against
  the gold answers (F1 by default; EM or LogicRAG's string accuracy selectable) and record its
  cost (LLM calls, tokens, seconds). Faithful but slow: several LLM calls per question.
- ``retrieval`` (LLM-free): score the context each route would hand the LLM:
    * share of the question's gold supporting passages found in it (recall by passage id;
      for summary, a passage also counts when the context quotes one of its sentences of
      6+ words verbatim, since the extractive summaries hand the LLM that evidence);
    * when the data mark no supporting passage: 1.0 if a gold answer string occurs in it.
  Contexts:
    * chunk   = top-k search on the question (k=3, as the chunk route does);
    * summary = `engine.core.routes.summary.summary_context(question, kb, k=k)`;
    * logic   = a proxy of the DAG's retrieval: top-k for the question, then a second hop
      whose query is the question + up to 8 entity-like spans of the first hits' texts that
      the question does not name (the bridge entities a sub-question would carry once the
      first hop is answered), searched with the first hits excluded (LogicRAG's sampling
      without replacement); context = the union (2k chunks). On HotpotQA and 2Wiki it finds
      more supporting passages than top-k and than a titles-only second hop, and at least as
      many as plain top-2k: the bridge entities help, not the extra width (figures:
      docs/results/design/design_measurements.md).
  Because the logic context is a superset of the chunk context, logic can only tie or win on
  score; the cost term of the preference (training.labels.labels) is what sends a question to chunk
  when the second hop adds nothing. Costs here are nominal tokens per route
  (router.policy.NOMINAL_TOKENS) plus the measured context size.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from engine.core.routes import ROUTES, LogicRoute, RouteContext, answer_on, check_route, make_route
from engine.core.routes.summary import summary_context
from engine.floor.base.errors import LogicRouteError
from engine.floor.base.metrics import normalize_answer
from router.features import SPAN
from router.policy import NOMINAL_TOKENS
from training.common.answer_scores import metric_fn, metric_name

if TYPE_CHECKING:
    from hierarchy.datasets import Question

SCORERS = ("answer", "retrieval")
HOP_ENTITIES = 8  # bridge-entity candidates appended to the second-hop query
# LLM calls of a route the cascade skipped, for cost tables (the logic route's mean on the benchmarks).
NOMINAL_CALLS: dict[str, int] = {"chunk": 1, "summary": 1, "logic": 5}


@dataclass
class LabelConfig:
    """How labels are made; every field lands in each row (so mixed files are detected)."""

    scorer: str = field(
        default="retrieval", metadata={"help": "answer (run routes with the LLM) | retrieval (LLM-free)"}
    )
    routes: tuple[str, ...] = field(default=ROUTES, metadata={"help": "routes to score, cheapest first"})
    metric: str = field(
        default="f1",
        metadata={"help": "answer scorer metric: f1 | em | string_acc (acc accepted) | rouge_l | coverage"},
    )
    k: int = field(default=3, metadata={"help": "chunks per retrieval (LogicRAG and the chunk route use 3)"})
    lam: float = field(default=0.1, metadata={"help": "cost weight in the preference: score - lam * cost/max_cost"})
    tau: float = field(default=0.1, metadata={"help": "softmax temperature of the preference vector"})
    llm: str | None = field(default=None, metadata={"help": "LLM spec used by the answer scorer (None for retrieval)"})
    style: str = field(
        default="short",
        metadata={"help": "answer style of the routes: short (phrases) | reader (sentences, for sentence answers)"},
    )
    logic_preset: str = field(
        default="auto",
        metadata={
            "help": "settings of the logic route: auto (by style, as RoutedRAG picks them) or a name of "
            "engine.core.routes.logic.config.PRESETS; held resolved (a row names its preset when not paper)"
        },
    )
    stop_score: float | None = field(
        default=None,
        metadata={
            "help": "answer scorer's cascade: when the cheapest route scores >= stop_score, the others are not "
            "run (None: run every route). At 1.0 the oracle label is exact: no route can score higher, and ties "
            "go to the cheaper route"
        },
    )

    def __post_init__(self) -> None:
        from engine.core.routes.logic.config import resolve_preset

        self.metric = metric_name(self.metric)
        try:
            self.logic_preset = resolve_preset(self.logic_preset, self.style)
        except (KeyError, ValueError) as e:
            raise LogicRouteError(f"logic preset {self.logic_preset!r} for style {self.style!r}: {e}") from None


# ---------------------------------------------------------------- retrieval scorer


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
    return any(
        len(s.split()) >= min_words and s in context for s in (" ".join(x.split()) for x in _SENT.split(doc_text))
    )


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
            elif kb is not None and flat:
                found += any(_quoted_in(c.text, flat) for c in kb.chunks_of(s))
        return found / len(q.supporting)
    t = normalize_answer(text)
    return float(any(g and normalize_answer(g) and normalize_answer(g) in t for g in q.answers))


def hop_query(question: str, first: Sequence) -> str:
    """The second-hop query: the question + up to HOP_ENTITIES entity-like spans
    (capitalized runs) of the first hits' texts that the question does not name yet: the
    bridge entities a LogicRAG sub-question would carry once the first hop is answered."""
    low = question.lower()
    spans: list[str] = []
    for c in first:
        for m in SPAN.findall(c.text or ""):
            m = m.strip()
            if len(m) > 2 and m.lower() not in low and m not in spans:
                spans.append(m)
    return (question + " " + " ".join(spans[:HOP_ENTITIES])).strip()


def _q(vectors: dict | None, text: str):
    """The precomputed embedding of `text`, else the text (the KB embeds it)."""
    v = (vectors or {}).get(text)
    return text if v is None else v


def logic_proxy_context(question: str, kb, k: int = 3, vectors: dict | None = None) -> list:
    """Two-hop retrieval standing in for the DAG (see module doc). `vectors` maps query
    texts to precomputed embeddings (label_questions batches them)."""
    first = kb.search(_q(vectors, question), k=k)
    hop = hop_query(question, first)
    second = kb.search(_q(vectors, hop), k=k, exclude={c.chunk_id for c in first})
    return list(first) + list(second)


def _chunk_context(question: str, kb, k: int = 3, vectors: dict | None = None):
    return kb.search(_q(vectors, question), k=k)


def _summary_context(question: str, kb, k: int = 3, vectors: dict | None = None):
    return summary_context(question, kb, k=k, query_vector=(vectors or {}).get(question))


# route -> the context the retrieval scorer judges for it
RETRIEVAL_CONTEXTS: dict[str, Callable] = {
    "chunk": _chunk_context,
    "summary": _summary_context,
    "logic": logic_proxy_context,
}


def retrieval_contexts(
    question: str, kb, routes: Sequence[str], k: int = 3, vectors: dict | None = None
) -> dict[str, tuple[list, float]]:
    """route -> (context, seconds) for the LLM-free scorer. The question is whitespace-
    normalized as the routes do (check_question)."""
    question = " ".join(question.split())
    out = {}
    for r in routes:
        context = RETRIEVAL_CONTEXTS.get(check_route(r, allow_auto=False))
        if context is None:
            raise LogicRouteError(
                f"the retrieval scorer has no context for route {r!r} ({', '.join(RETRIEVAL_CONTEXTS)})"
            )
        t0 = time.perf_counter()
        out[r] = (context(question, kb, k=k, vectors=vectors), time.perf_counter() - t0)
    return out


def prefetch_vectors(questions: Sequence["Question"], kb, k: int = 3) -> dict:
    """Embed a block of questions and their second-hop queries in two batched calls:
    one-by-one encodes cost far more on a busy CPU. {} when the KB has no embedder."""
    emb = kb.embedder
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


def score_retrieval(
    q: "Question", kb, cfg: LabelConfig, vectors: dict | None = None
) -> tuple[dict[str, float], dict[str, dict]]:
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


# The logic route's wall-clock cap while labelling (its own default, 300 s, would make a label
# depend on how busy the machine is; the routing benchmark uses the same cap).
LOGIC_MAX_SECONDS = 1800.0


def answer_route(route: str, question: str, kb, llm, k: int = 3, style: str = "short", logic_preset: str = "paper"):
    """The answer scorer's default runner: the route as the registry runs it."""
    from training.common.logic_experiment import experiment

    config = experiment(logic_preset, k=k, max_seconds=LOGIC_MAX_SECONDS) if route == LogicRoute.name else None
    return answer_on(make_route(route, config), question, RouteContext(kb, llm, k, style))


def score_answer(
    q: "Question", kb, llm, cfg: LabelConfig, runner: Callable = answer_route
) -> tuple[dict[str, float], dict[str, dict], dict]:
    """Run each route; a route that fails scores 0 and its error is kept in the row."""
    metric = metric_fn(cfg.metric)
    scores, costs, extra = {}, {}, {"answers_pred": {}, "errors": {}}
    for i, r in enumerate(cfg.routes):
        if cfg.stop_score is not None and i == 1 and scores[cfg.routes[0]] >= cfg.stop_score:
            _skip_costlier(cfg.routes[i:], scores, costs, extra)
            break
        t0 = time.perf_counter()
        try:
            ans = runner(r, q.text, kb, llm, cfg.k, style=cfg.style)
        except LogicRouteError as e:
            scores[r] = 0.0
            costs[r] = {"llm_calls": 0, "tokens": 0, "seconds": round(time.perf_counter() - t0, 3)}
            extra["errors"][r] = f"{type(e).__name__}: {e}"
            continue
        u = ans.usage
        scores[r] = metric(ans.text, q.answers)
        costs[r] = {
            "llm_calls": u.llm_calls,
            "tokens": u.total_tokens,
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "cached_calls": u.cached_calls,
            "seconds": round(u.seconds or (time.perf_counter() - t0), 3),
        }
        extra["answers_pred"][r] = ans.text
        if ans.trace.confidence is not None:  # the cheap routes' own certainty, for escalation
            extra.setdefault("confidence", {})[r] = ans.trace.confidence
        if ans.flags:  # visible fallbacks (a budget stop, a repaired plan): the label may be degraded
            extra.setdefault("flags", {})[r] = list(ans.flags)
    if not extra["errors"]:
        del extra["errors"]
    return scores, costs, extra


def _skip_costlier(routes: Sequence[str], scores: dict, costs: dict, extra: dict) -> None:
    """Routes the cascade did not run once the cheapest route was perfect. Their score is imputed
    at its upper bound (the cheapest route's), their cost at the nominal estimate but never below
    the cheapest route's, so the oracle stays the cheapest route, as a full run gives it (no score
    beats 1.0, a costlier route has a lower utility, ties go to the cheaper route); the soft
    preference values rest on these estimates. The row lists them under "skipped"."""
    first = next(iter(scores))
    floor = float(costs[first].get("tokens") or 0.0)
    for r in routes:
        scores[r] = scores[first]
        costs[r] = {
            "tokens_est": max(NOMINAL_TOKENS.get(r, 0.0), floor),
            "llm_calls_est": NOMINAL_CALLS.get(r, 1),
            "skipped": True,
        }
    extra["skipped"] = list(routes)
