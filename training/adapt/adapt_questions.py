"""Questions written from a knowledge base's own chunks, each with its answer and supporting
chunk ids known by construction: what `logicroute adapt` labels and fine-tunes a specialist on
(issue 43). Kinds: single (one chunk), bridge (two hops: chunk A names the subject of chunk B),
comparison (two entities on one attribute) and overview (one summary node).

Code picks what to write from (training.adapt.adapt_candidates), the user's LLM writes (prompts in
training/adapt/question_prompts.py, JSON schemas), and every question passes checks before it is kept
(training.adapt.adapt_checks): cheap code checks first, then at most two LLM calls. Every attempt is a
row of the output JSONL, kept or rejected with its reason, so a rerun continues where the last
run stopped and never writes from the same chunks twice."""

from __future__ import annotations

import hashlib
import random
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from engine.floor.base.errors import KBEmptyError, LogicRouteError

KINDS = ("single", "bridge", "comparison", "overview")
DEFAULT_KINDS: dict[str, float] = {"single": 0.35, "bridge": 0.35, "comparison": 0.15, "overview": 0.15}
ATTEMPTS_PER_KEPT = 3  # a kind stops after this many attempts per question it is to keep (+2)


@dataclass(frozen=True)
class WrittenQuestion:
    id: str  # stable across reruns: kind + a hash of the chunk ids it was written from
    kind: str  # one of KINDS
    question: str
    answer: str  # the constructed short answer
    chunk_ids: tuple[str, ...]  # the KB chunks it was written from
    titles: tuple[str, ...]  # their document titles


@dataclass
class WritingReport:
    written: Counter[str] = field(default_factory=Counter)  # by kind: questions the LLM wrote (well-formed)
    kept: Counter[str] = field(default_factory=Counter)  # by kind
    rejected: Counter[str] = field(default_factory=Counter)  # by reason
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    attempted: Counter[str] = field(default_factory=Counter)  # by kind: candidates tried, malformed included
    rejected_by_kind: dict[str, Counter[str]] = field(default_factory=dict)  # kind -> reason -> count
    cost_by_kind: dict[str, dict[str, float]] = field(default_factory=dict)  # kind -> llm_calls, tokens, seconds
    notes: list[str] = field(default_factory=list)  # kinds skipped and why, limits reached

    def shares(self) -> dict[str, float]:
        """Each rejection reason's share of the attempts."""
        total = sum(self.attempted.values())
        return {r: n / total for r, n in self.rejected.most_common()} if total else {}

    def to_dict(self) -> dict:
        return {
            "attempted": dict(self.attempted),
            "written": dict(self.written),
            "kept": dict(self.kept),
            "rejected": dict(self.rejected),
            "rejected_by_kind": {k: dict(v) for k, v in self.rejected_by_kind.items()},
            "rejected_shares": {r: round(s, 4) for r, s in self.shares().items()},
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "seconds": round(self.seconds, 2),
            "cost_by_kind": self.cost_by_kind,
            "notes": list(self.notes),
        }


def question_id(kind: str, chunk_ids: tuple[str, ...]) -> str:
    """kind + a hash of the chunk ids: the same candidate gets the same id on every run."""
    return f"{kind}-{hashlib.sha1('|'.join((kind, *chunk_ids)).encode()).hexdigest()[:12]}"


def kind_shares(kinds: Mapping[str, float] | None) -> dict[str, float]:
    shares = dict(DEFAULT_KINDS if kinds is None else kinds)
    unknown = sorted(set(shares) - set(KINDS))
    if unknown:
        raise LogicRouteError(f"unknown question kind(s) {', '.join(unknown)}; choose from {', '.join(KINDS)}")
    if any(v < 0 for v in shares.values()) or not any(v > 0 for v in shares.values()):
        raise LogicRouteError("question kind shares must be >= 0 with at least one > 0")
    total = sum(shares.values())
    return {k: v / total for k, v in shares.items() if v > 0}


def quotas(n: int, shares: Mapping[str, float]) -> dict[str, int]:
    """n split by share, largest remainders first, so the quotas sum to n."""
    raw = {k: n * s for k, s in shares.items()}
    q = {k: int(v) for k, v in raw.items()}
    for k in sorted(raw, key=lambda k: (q[k] - raw[k], KINDS.index(k)))[: n - sum(q.values())]:
        q[k] += 1
    return q


def _from_row(row: dict) -> WrittenQuestion:
    return WrittenQuestion(
        row["id"], row["kind"], row["question"], row["answer"], tuple(row["chunk_ids"]), tuple(row["titles"])
    )


def read_written(path: str | Path) -> list[WrittenQuestion]:
    """The kept questions of a writer's output file, in the order they were written."""
    from training.common.jsonl_store import read_jsonl

    return [_from_row(r) for r in read_jsonl(path) if r.get("status") == "kept"]


def _book(report: WritingReport, row: dict) -> None:
    kind = row["kind"]
    report.attempted[kind] += 1
    reason = row.get("reason")
    if reason != "malformed":
        report.written[kind] += 1
    if row["status"] == "kept":
        report.kept[kind] += 1
    else:
        report.rejected[reason] += 1
        report.rejected_by_kind.setdefault(kind, Counter())[reason] += 1
    report.llm_calls += row.get("llm_calls", 0)
    report.prompt_tokens += row.get("prompt_tokens", 0)
    report.completion_tokens += row.get("completion_tokens", 0)
    report.seconds += row.get("seconds", 0.0)
    cost = report.cost_by_kind.setdefault(kind, {"llm_calls": 0, "tokens": 0, "seconds": 0.0})
    cost["llm_calls"] += row.get("llm_calls", 0)
    cost["tokens"] += row.get("prompt_tokens", 0) + row.get("completion_tokens", 0)
    cost["seconds"] = round(cost["seconds"] + row.get("seconds", 0.0), 2)


def _sources(kb, wanted: list[str], seed: int) -> tuple[dict[str, Iterator], list[str]]:
    """Each wanted kind's candidates, and a note for each kind the KB cannot give."""
    from training.adapt import adapt_candidates as ac

    chunks = ac.kb_chunks(kb)
    notes: list[str] = []
    sources: dict[str, Iterator] = {}
    for kind in wanted:
        rng = random.Random(f"{seed}:{kind}")
        if kind == "single":
            sources[kind] = ac.single_candidates(chunks, rng)
        elif kind == "bridge":
            pairs = ac.bridge_pairs(chunks)
            if not pairs:
                notes.append(
                    f"no bridge questions: no chunk names another document's title ({len(chunks)} chunks, "
                    f"{len(kb.doc_ids)} documents); a two-hop question needs one that does"
                )
                continue
            rng.shuffle(pairs)
            sources[kind] = iter(pairs)
        elif kind == "comparison":
            sources[kind] = ac.comparison_candidates(kb, chunks, rng)
        else:
            gen, why = ac.overview_candidates(kb, rng)
            if why:
                notes.append(f"no overview questions: {why}")
                continue
            sources[kind] = gen
    return sources, notes


def _next_kind(sources: dict, quota: dict, kept: Counter, tries: Counter, shares: dict) -> str | None:
    """The kind furthest below its quota that can still try; once every quota is met or spent,
    any kind with candidates left fills the rest (its share breaks ties)."""
    live = [k for k in sources if tries[k] < ATTEMPTS_PER_KEPT * max(quota.get(k, 0), 1) + 2]
    short = [k for k in live if kept[k] < quota.get(k, 0)]
    pick = short or live
    if not pick:
        return None
    return max(pick, key=lambda k: (quota.get(k, 0) - kept[k], shares.get(k, 0.0), -KINDS.index(k)))


def write_questions(
    kb,
    llm,
    *,
    n: int,
    out: Path,
    kinds: Mapping[str, float] | None = None,
    seed: int = 0,
    minutes: float | None = None,
    progress: bool = True,
) -> tuple[list[WrittenQuestion], WritingReport]:
    """Write up to n kept questions from the KB's chunks into `out` (JSONL, one row per attempt:
    kept or rejected with its reason); a rerun reads `out` and continues: candidates already
    tried are skipped without an LLM call, so n kept questions cost the same LLM calls however
    often the run is cut. `kinds` weighs the question kinds (default DEFAULT_KINDS); a kind the KB
    cannot give (no bridge link, no summary layers) is skipped with a note and its quota goes to
    the others. Stops at n kept, when every kind ran out of candidates or tries, or after
    `minutes`. Returns every kept question in `out` (at most n) and a report over all its rows."""
    from engine.floor.base.progress import progress_bar
    from training.adapt.adapt_checks import attempt
    from training.common.jsonl_store import JsonlStore

    if n < 0:
        raise LogicRouteError(f"the number of questions must be >= 0, got {n}")
    if not kb.chunk_ids:
        raise KBEmptyError(f"the knowledge base at {kb.path} is empty (no chunks): there is nothing to write from")
    shares = kind_shares(kinds)
    out = Path(out)
    store = JsonlStore(out, key=lambda r: r["id"])
    report = WritingReport()
    for row in store.by_key.values():
        _book(report, row)
    sources, report.notes = _sources(kb, list(shares), seed)
    if not sources:
        raise LogicRouteError("no question kind can be written from this knowledge base: " + "; ".join(report.notes))
    live_shares = {k: shares[k] for k in sources}
    quota = quotas(n, kind_shares(live_shares))
    kept, tries = Counter(report.kept), Counter(report.attempted)
    deadline = None if minutes is None else time.monotonic() + 60 * minutes
    bar = progress_bar(n, "writing questions", "q", progress)
    bar.update(min(sum(kept.values()), n))
    try:
        while sum(kept.values()) < n:
            if deadline is not None and time.monotonic() >= deadline:
                report.notes.append(f"stopped at the {minutes:g}-minute limit with {sum(kept.values())} of {n} kept")
                break
            kind = _next_kind(sources, quota, kept, tries, live_shares)
            if kind is None:
                report.notes.append(f"ran out of candidates with {sum(kept.values())} of {n} kept")
                break
            cand = next(sources[kind], None)
            if cand is None:
                del sources[kind]
                continue
            qid = question_id(kind, cand.chunk_ids)
            if qid in store:  # tried on an earlier run: booked already
                continue
            row = {"id": qid, **attempt(cand, kb, llm)}
            store.append(row)
            _book(report, row)
            tries[kind] += 1
            if row["status"] == "kept":
                kept[kind] += 1
                bar.update(1)
            bar.set_postfix(kept=sum(kept.values()), tried=sum(tries.values()), refresh=False)
    finally:
        bar.close()
    questions = [_from_row(r) for r in store.rows if r.get("status") == "kept"]
    return list({q.id: q for q in questions}.values())[:n], report
