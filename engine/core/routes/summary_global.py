"""The summary route's global mode (SummaryConfig(mode="global")): questions whose answer is a set
spread over the corpus ("Which commands can change the lockfile?").

GraphRAG's global search maps a question over community summaries and reduces the partial answers;
LlamaIndex's tree summarize folds passages into one answer. Both spend many calls on long prompts,
which the local model (4,096-token window, a few dozen tokens a second on two cores) cannot
afford. Here:

1. breadth, no LLM (engine.core.routes.summary_gather): lexical, dense and summary-cluster rankings
   fused, each chunk cut to its lines that carry the question's rare words and its item-naming
   lines, so a prompt shows ~15 short passages from many documents instead of 3 whole chunks;
2. map: each batch of passages (at most `map_calls` batches of `map_tokens` passage tokens) gets
   one structured call that names the items answering the question, each with its passage;
3. reduce, in code: an item is kept only when its words occur in a passage of its batch (the
   small model's invented names go; a citation of the wrong passage is corrected to the nearest
   one holding the name) and its flags and numbers are written as a passage writes them (respelled
   when only their order or marks differ, else dropped), items are merged by their words, and
   the answer lists them, each citing its passages [n]. No item anywhere: "Not in the indexed
   documents."

The trace records every batch, the calls made and the bound (`llm_calls`, `max_llm_calls`).
A budget's limits bound the map (fewer batches); a deadline stops it, and what the finished
batches found is still answered, flagged.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING

from engine.core.routes.specifics import holds_as_written, plain, specific_words
from engine.core.routes.summary_breadth import NO_NEW_ITEM, evidence, unseen_passages
from engine.core.routes.summary_config import MAX_MAP_CALLS, SummaryConfig
from engine.core.routes.summary_gather import compress, gather, key_terms, rare_terms
from engine.floor.base.errors import DeadlineError, StructuredOutputError
from engine.floor.base.trace import Trace
from engine.floor.base.types import Answer, RetrievedChunk, Usage, numbered_sources
from engine.floor.llm.base import LLM, Stopwatch, call_llm, estimate_prompt_tokens, flag
from engine.floor.prompts.answer import NOT_IN_DOCUMENTS
from engine.floor.prompts.summary_global import MAP_SCHEMA, map_messages

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.kb import KnowledgeBase
    from hierarchy.layers.tree import Layers

MAP_MAX_TOKENS = 400  # a reply of MAX_ITEMS short items; more would be a list the model invents
POOL_PER_CALL = 24  # candidates gathered per map call: more than a batch holds once compressed
_WORD = re.compile(r"[^\W_]+")


@dataclass
class Item:
    """One named item of the reduce: its name as first written, and the passages citing it."""

    name: str
    passages: list[int] = field(default_factory=list)


def words_of(text: str) -> tuple[str, ...]:
    """Lower-case words, the identity of an item: `npm-publish`, "npm publish" and `npm publish`
    are one item; `--otp` and `otp` are one."""
    return tuple(w.lower() for w in _WORD.findall(text))


def batches(passages: list[RetrievedChunk], map_calls: int, map_tokens: int) -> list[list[RetrievedChunk]]:
    """Consecutive batches of passages, each within `map_tokens` estimated tokens (a passage
    alone always fits), at most `map_calls` of them: the best passages come first."""
    out: list[list[RetrievedChunk]] = []
    cur: list[RetrievedChunk] = []
    used = 0
    for p in passages:
        t = _tokens(p)
        if cur and used + t > map_tokens:
            out.append(cur)
            if len(out) == map_calls:
                return out
            cur, used = [], 0
        cur.append(p)
        used += t
    if cur and len(out) < map_calls:
        out.append(cur)
    return out


def _tokens(p: RetrievedChunk) -> int:
    return estimate_prompt_tokens([{"content": f"[00] {p.title}: {p.text}"}])


def numbered(batch: list[RetrievedChunk], first: int) -> str:
    """The batch as prompt lines, numbered from `first` (numbers run on across batches, so a
    citation names one passage of the whole answer)."""
    return "\n".join(f"[{first + i}] {p.title}: {p.text}" for i, p in enumerate(batch))


def reduce_items(replies: list[tuple[int, list[RetrievedChunk], list[dict]]]) -> tuple[list[Item], list[str]]:
    """(items merged by their words in first-seen order, names dropped with why). `replies`: per
    batch, its first passage number, its passages and the items its call named. An item is kept
    only when its words are all in a passage of its batch (title and text as shown): the one it
    cites, else the nearest that holds them (the small model often cites its neighbour: the
    citation is corrected); a name no passage holds was invented, and is dropped."""
    merged: dict[tuple[str, ...], Item] = {}
    dropped: list[str] = []
    for first, batch, items in replies:
        held = [set(words_of(f"{p.title} {p.text}")) for p in batch]
        for it in items:
            name = " ".join(str(it.get("name", "")).split()).strip("`'\" ")
            key = words_of(name)
            if not key:
                continue
            cited = it.get("passage") if isinstance(it.get("passage"), int) else first
            holding = [first + i for i, words in enumerate(held) if set(key) <= words]
            if not holding:
                dropped.append(f"{name} (in no passage of its batch)")
                continue
            spelled = as_spelled(name, [f"{batch[m - first].title} {batch[m - first].text}" for m in holding])
            if spelled is None:
                dropped.append(f"{name} (its flag, number or key=value is written so in no passage)")
                continue
            if spelled != name:  # the same words, so the same passages hold it
                name, key = spelled, words_of(spelled)
            n = min(holding, key=lambda m: (abs(m - cited), m))
            item = merged.setdefault(key, Item(name))
            if n not in item.passages:
                item.passages.append(n)
    return list(merged.values()), dropped


def as_spelled(name: str, texts: list[str]) -> str | None:
    """`name` with each of its specific words (a flag, a number, key=value: engine.core.routes.specifics)
    spelled as one of `texts` spells it: the same words, in the passage's order and marks
    (`--x=yes|no` where the passage has `--x=no|yes`); None when one of them is written in no
    text in any spelling (`-a` where the passage has only the word "a"). The answer is then held
    to its passages word for word (engine.core.absence.ungrounded_reason)."""
    out = name
    for word in specific_words(name):
        if any(holds_as_written(plain(t), word) for t in texts):
            continue
        same = sorted(words_of(word))
        written = next((w for t in texts for w in specific_words(t) if sorted(words_of(w)) == same), None)
        if written is None:
            return None
        whole = re.compile(r"(?<![\w.-])" + re.escape(word) + r"(?![\w-])")  # `-a` and not in `--all`
        out = whole.sub(written.replace("\\", "\\\\"), out)
    return out


def list_answer(items: list[Item], style: str) -> str:
    """reader: one item a line, citing its passages; short: the names, comma-separated."""
    if not items:
        return NOT_IN_DOCUMENTS
    if style == "short":
        return ", ".join(i.name for i in items)
    lines = [f"- {i.name} [{', '.join(map(str, sorted(i.passages)))}]" for i in items]
    return f"{len(items)} found in the documents:\n" + "\n".join(lines)


def global_passages(
    q: str, kb: "KnowledgeBase", layers: "Layers", cfg: SummaryConfig
) -> tuple[list[list[RetrievedChunk]], dict]:
    """The batches the map calls will read (no LLM call) and the record of how they were found."""
    qv = kb.embedder.encode([q])[0]
    terms = key_terms(q, kb)
    found = gather(q, kb, layers, qv, POOL_PER_CALL * cfg.map_calls, rare=rare_terms(terms), terms=terms)
    shown = [compress(c, terms, cfg.passage_words) for c in found.chunks]
    parts = batches([p for p in shown if p.text], cfg.map_calls, cfg.map_tokens)
    record = {
        "terms": terms,
        "candidates": len(found.chunks),
        "found_by": found.found_by,
        "key_terms": {t: round(w, 2) for t, w in terms.items()},
        "batches": [len(b) for b in parts],
        "documents": len({p.doc_id for b in parts for p in b}),
        "flags": found.flags,
    }
    return parts, record


def answer_global(
    q: str, kb: "KnowledgeBase", llm: LLM, layers: "Layers", cfg: SummaryConfig, style: str = "reader"
) -> Answer:
    """The global mode's answer (module docstring); `q` already checked."""
    watch = Stopwatch()
    usage = Usage()
    trace = Trace(route="summary")
    trace.details["summary_config"] = asdict(cfg)
    parts, record = global_passages(q, kb, layers, cfg)
    for f in record.pop("flags"):
        flag(trace, f)
    terms = record.pop("terms")
    mapper = _Map(q, llm, usage, trace)
    done = all(mapper.read(batch, len(parts)) for batch in parts)
    breadth = _breadth(q, kb, cfg, parts, terms, mapper) if done and cfg.breadth_calls > len(parts) else None
    shown = [p for _, batch, _ in mapper.replies for p in batch] + [p for b in parts[len(mapper.replies) :] for p in b]
    trace.retrieved = [{"chunk_id": c.chunk_id, "title": c.title, "score": round(c.score, 4)} for c in shown]
    found, dropped = reduce_items(mapper.replies)
    if dropped:
        flag(trace, f"{len(dropped)} listed name(s) found in no passage shown: left out")
    trace.details["global"] = {
        **record,
        "llm_calls": usage.llm_calls,
        "max_llm_calls": max(cfg.map_calls, cfg.breadth_calls),
        "breadth": breadth,
        "items": {i.name: sorted(i.passages) for i in found},
        "dropped": dropped,
    }
    usage.seconds = watch.elapsed()
    text = list_answer(found, style)
    return Answer(text=text, route="summary", usage=usage, trace=trace, sources=numbered_sources(shown))


class _Map:
    """The map calls of one answer: each batch read in one structured call, its passages numbered
    on from the last batch's; `replies` what reduce_items takes."""

    def __init__(self, q: str, llm: LLM, usage: Usage, trace: Trace) -> None:
        self.q, self.llm, self.usage, self.trace = q, llm, usage, trace
        self.replies: list[tuple[int, list[RetrievedChunk], list[dict]]] = []
        self.first = 1

    def read(self, batch: list[RetrievedChunk], planned: int) -> bool:
        """Map one batch; False when the answer's deadline stopped it (no batch is read after)."""
        first = self.first
        try:
            c = call_llm(
                self.llm,
                map_messages(self.q, numbered(batch, first)),
                purpose="map",
                usage=self.usage,
                trace=self.trace,
                schema=MAP_SCHEMA,
                max_tokens=MAP_MAX_TOKENS,
            )
            items = c.data.get("items", []) if isinstance(c.data, dict) else []
        except StructuredOutputError as e:  # this batch gives nothing; the others still count
            flag(self.trace, f"map call on passages [{first}-{first + len(batch) - 1}] gave no valid list ({e})")
            items = []
        except DeadlineError as e:  # the answer's time is up: answer from the batches done
            flag(self.trace, f"{e}: answered from {len(self.replies)} of {planned} batches")
            return False
        self.replies.append((first, batch, items))
        self.first += len(batch)
        return True


def _breadth(
    q: str, kb: "KnowledgeBase", cfg: SummaryConfig, parts: list, terms: dict[str, float], mapper: _Map
) -> dict:
    """More batches from the evidence pages the first ones did not show (engine.core.routes.
    summary_breadth), until cfg.breadth_calls batches, the evidence's end, or (breadth_stop
    no-new-item) a batch that names no new item. Returns the trace's record of it."""
    found = evidence(q, kb, terms)
    shown_docs = {p.doc_id for b in parts for p in b}
    more = batches(unseen_passages(kb, found, shown_docs, terms, cfg.passage_words), MAX_MAP_CALLS, cfg.map_tokens)
    record = {
        "evidence_terms": list(found.terms),
        "evidence_pages": len(found.pages),
        "unseen_pages": sum(len(b) for b in more),
        "bound": cfg.breadth_calls,
        "stop": cfg.breadth_stop,
        "batches_read": 0,
    }
    stopped = "the evidence holds no page the batches did not show"
    for batch in more:
        if mapper.usage.llm_calls >= cfg.breadth_calls:  # calls, a failed reply's retry included
            stopped = f"the bound, {cfg.breadth_calls} map calls"
            break
        before = len(reduce_items(mapper.replies)[0])
        if not mapper.read(batch, len(mapper.replies) + 1):
            stopped = "the answer's deadline"
            break
        record["batches_read"] += 1
        if cfg.breadth_stop == NO_NEW_ITEM and len(reduce_items(mapper.replies)[0]) == before:
            stopped = "a batch named no new item"
            break
    else:
        if more:
            stopped = "every evidence page was read"
    record["stopped"] = stopped
    return record


def bounded_config(cfg: SummaryConfig, limits: dict) -> SummaryConfig:
    """`cfg` with no more map calls, first batches and evidence batches together, than
    max_llm_calls allows, nor than max_prompt_tokens pays for (each call: its passages plus the
    prompt's fixed part). max_seconds needs nothing here: the answer's deadline stops the map
    (answer_global)."""
    cap = MAX_MAP_CALLS
    if limits.get("max_llm_calls") is not None:
        cap = min(cap, int(limits["max_llm_calls"]))
    if limits.get("max_prompt_tokens") is not None:
        per_call = cfg.map_tokens + estimate_prompt_tokens(map_messages("", ""))
        cap = min(cap, int(limits["max_prompt_tokens"]) // per_call)
    calls = max(1, min(cfg.map_calls, cap))
    breadth = min(cfg.breadth_calls, cap)
    return replace(cfg, map_calls=calls, breadth_calls=breadth if breadth > calls else 0)


def first_map_messages(q: str, kb: "KnowledgeBase", layers: "Layers", cfg: SummaryConfig) -> list[dict]:
    """The first map call's prompt, with no LLM call: what a prompt-token budget is checked against."""
    parts, _ = global_passages(q, kb, layers, cfg)
    return map_messages(q, numbered(parts[0], 1) if parts else "(none)")
