"""One attempt of the question writer: the LLM writes a question of a candidate's kind
(training/adapt/question_prompts.py), then the checks decide whether it is kept, cheapest first:

1. malformed: the reply failed its schema twice, or a field is blank;
2. code checks of the kind: a bridge's second-hop question names its entity (which code then
   replaces by the description), the final question names neither that intermediate answer nor
   the second chunk's title, and the description names the first chunk's subject (else the
   first hop is not needed); a single-hop question names its subject; a comparison names both
   entities, answers with one of them (or yes/no, to a yes/no question only) and, for a year
   compared by "first"/"later", the answer its two years give;
3. the answer is not in the question;
4. answerable from its named chunks: the answer's normalised tokens occur in them (a
   comparison: each value occurs in its own chunk), or else the LLM reading those chunks alone
   answers it (one call);
5. not answerable from the question alone: the LLM given no passage must not get it (one call).

Answers are compared with the project's token F1 (engine.floor.base.metrics), right at F1 >= 0.5."""

from __future__ import annotations

import re
import time

from engine.floor.base.errors import StructuredOutputError
from engine.floor.base.metrics import f1, normalize_answer
from engine.floor.base.trace import Trace
from engine.floor.base.types import RetrievedChunk, Usage
from training.adapt.adapt_candidates import STOP_WORDS, Candidate, entity_name

RIGHT_F1 = 0.5  # an answer this close to the constructed one counts as getting it
WRITE_TOKENS = 120  # a reply is ~40-70 tokens; a runaway field is cut here instead of at 160+ (slow on CPU)
READ_MAX_CHUNKS = 8  # an overview's reader check shows at most this many of its chunks
_YES_NO = ("yes", "no")
_EARLIER = frozenset("first earlier older oldest before earliest".split())  # noqa: SIM905
_LATER = frozenset("later last younger youngest after latest recent newer".split())  # noqa: SIM905
_STOP = frozenset(STOP_WORDS.split())
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_NAMED = re.compile(r"[\w.'’-]+")
_YES_NO_QUESTION = re.compile(r"(?i)(is|are|was|were|do|does|did|has|have|had|can|could|will|would)\b")


class Rejected(Exception):
    """A written question failed a check; the message is the reason the report counts."""


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split()


def _has_phrase(text: str, phrase: str) -> bool:
    """Whether the normalised phrase occurs in the normalised text as whole words."""
    p = " ".join(_tokens(phrase))
    return bool(p) and f" {p} " in f" {' '.join(_tokens(text))} "


def in_text(answer: str, text: str) -> bool:
    """Every normalised token of the answer occurs in the text."""
    words = set(_tokens(text))
    toks = _tokens(answer)
    return bool(toks) and all(t in words for t in toks)


def _proper_words(text: str) -> set[str]:
    """Words written with a capital, as written: a name's words, not the same word in lower case."""
    return {w.strip(".'’-") for w in _NAMED.findall(text) if w[:1].isupper()}  # "Vaskarra." is "Vaskarra"


def _distinct(name: str, known: str) -> set[str]:
    """A name's own capitalised words: long enough to identify it, and not also words of `known`."""
    return {w for w in _proper_words(name) if len(w) >= 4 and w.lower() not in _STOP} - _proper_words(known)


def names_entity(question: str, name: str, known: str = "") -> bool:
    """The question names `name`: whole, or by one of its own capitalised words not in `known`
    (a surname: "Brankov"; not "bank" in "the central bank" for "Bank of Vaskarra")."""
    return _has_phrase(question, name) or bool(_distinct(name, known) & _proper_words(question))


def _text(cand: Candidate) -> str:
    return "\n".join(f"{c.title}: {c.text}" for c in cand.chunks)


def _fields(c, names: tuple[str, ...]) -> dict[str, str]:
    data = c.data if isinstance(c.data, dict) else {}
    got = {k: str(data.get(k) or "").strip() for k in names}
    empty = [k for k, v in got.items() if not v]
    if empty:
        raise Rejected("malformed")
    return got


def _write(cand: Candidate, llm, usage: Usage, trace: Trace) -> tuple[str, str, dict]:
    """Ask the LLM for the candidate's question: (question, answer, details kept in the row). A
    bridge takes two calls: the link on chunk A, then a single-hop question on chunk B."""
    from training.adapt import question_prompts as p

    if cand.kind == "single":
        (c,) = cand.chunks
        msgs, schema, names = p.single_messages(c.title, c.text), p.SINGLE_SCHEMA, ("question", "answer")
    elif cand.kind == "bridge":
        a, b = cand.chunks
        description = _link(cand, llm, usage, trace)
        msgs, schema, names = p.single_messages(b.title, b.text), p.SINGLE_SCHEMA, ("question", "answer")
    elif cand.kind == "comparison":
        a, b = cand.chunks
        msgs, schema = p.comparison_messages(a.title, a.text, b.title, b.text), p.COMPARISON_SCHEMA
        names = ("attribute", "value_a", "value_b", "question", "answer")
    else:
        titles = list(cand.titles)
        msgs, schema, names = p.overview_messages(titles, cand.summary), p.OVERVIEW_SCHEMA, ("question", "answer")
    got = _ask(llm, msgs, schema, names, f"write {cand.kind}", usage, trace)
    question, answer = got.pop("question"), got.pop("answer")
    if cand.kind == "bridge":
        trace.details["reply"] |= {"hop2": question, "answer": answer}
        question, got = (
            bridge_question(question, description, cand.entity),
            {"description": description, "hop2": question},
        )
    return question, answer, got


def _ask(llm, msgs: list[dict], schema: dict, names: tuple[str, ...], purpose: str, usage: Usage, trace: Trace) -> dict:
    """One writing call: its fields, stripped (kept in trace.details["reply"] for the row), or Rejected("malformed")."""
    from engine.floor.llm.base import call_llm

    try:
        c = call_llm(llm, msgs, purpose=purpose, usage=usage, trace=trace, schema=schema, max_tokens=WRITE_TOKENS)
    except StructuredOutputError:
        raise Rejected("malformed") from None
    got = _fields(c, names)
    trace.details["reply"] = {**trace.details.get("reply", {}), **got}
    return got


def _link(cand: Candidate, llm, usage: Usage, trace: Trace) -> str:
    """How chunk A describes the bridge's entity, checked before the second hop is written: it
    names A's subject (else the first hop is not needed) and not the entity."""
    from training.adapt import question_prompts as p

    a, _ = cand.chunks
    subject = entity_name(a.title)
    msgs = p.link_messages(a.title, a.text, cand.entity, subject=subject)
    description = _ask(llm, msgs, p.LINK_SCHEMA, ("description",), "write bridge link", usage, trace)["description"]
    if names_entity(description, cand.entity, known=_around(cand)):
        raise Rejected("names the intermediate answer")
    if not names_entity(description, subject):
        raise Rejected("does not lead from the first chunk's subject")
    return description


def bridge_question(hop2: str, description: str, entity: str) -> str:
    """The second hop's question with the entity's name replaced by how chunk A describes it."""
    pattern = re.compile(r"(\b(?:the|The)\s+)?" + re.escape(entity), re.IGNORECASE)
    if pattern.search(hop2):  # "the Bank of X" -> "the central bank of Y", not "the the central bank"
        has_article = re.match(r"(?i)(the|a|an)\s", description)
        return pattern.sub(lambda m: description if has_article else (m.group(1) or "") + description, hop2, count=1)
    if _has_phrase(hop2, description):  # the model put the description in itself
        return hop2
    raise Rejected("second hop does not name its entity")


def names_subject(question: str, chunks) -> bool:
    """The question names something its chunks name: a title's name, or a capitalised word,
    number or dotted name ("path.relative") that occurs in them; not "the river" alone."""
    text = " ".join(f"{c.title} {c.text}" for c in chunks)
    source = (set(_tokens(text)) | {t for w in _NAMED.findall(text) for t in _tokens(w)}) - _STOP  # "f.x(a)": f.x
    words = _NAMED.findall(question)[1:]  # the first word is capitalised anyway
    named = {t for w in words if w[:1].isupper() or any(ch.isdigit() or ch in "._" for ch in w) for t in _tokens(w)}
    return bool(named & source) or any(_has_phrase(question, entity_name(c.title)) for c in chunks)


def _around(cand: Candidate) -> str:
    """Chunk A without the entity's mentions: a word of the entity's name that A also uses on its
    own ("Vaskarra" of "Bank of Vaskarra" in "the currency of Vaskarra") does not name the entity."""
    a = cand.chunks[0]
    return re.sub(re.escape(cand.entity), " ", f"{a.title} {a.text}", flags=re.IGNORECASE)


def _check_bridge(cand: Candidate, question: str) -> None:
    a, b = cand.chunks
    if _has_phrase(question, b.title):  # first: a title always holds its entity's name
        raise Rejected("names the second title")
    if names_entity(question, cand.entity, known=_around(cand)):
        raise Rejected("names the intermediate answer")


def _check_comparison(cand: Candidate, question: str, answer: str, got: dict) -> None:
    a, b = cand.chunks
    names = [entity_name(a.title), entity_name(b.title)]
    if not all(names_entity(question, n) for n in names):
        raise Rejected("does not name both entities")
    ans = normalize_answer(answer)
    picked = [n for n in names if f1(answer, n) >= RIGHT_F1]
    if ans not in _YES_NO and len(picked) != 1:
        raise Rejected("answer is neither entity")
    if (ans in _YES_NO) != bool(_YES_NO_QUESTION.match(question.strip())):
        raise Rejected("yes/no does not fit the question")
    if not (in_text(got["value_a"], a.text) and in_text(got["value_b"], b.text)):
        raise Rejected("not answerable from its chunks")
    years = [_YEAR.search(got["value_a"]), _YEAR.search(got["value_b"])]
    words = set(_tokens(question))
    if picked and all(years) and years[0].group() != years[1].group():
        earlier = names[0] if int(years[0].group()) < int(years[1].group()) else names[1]
        later = names[1] if earlier == names[0] else names[0]
        if (words & _EARLIER and picked[0] != earlier) or (words & _LATER and picked[0] != later):
            raise Rejected("answer contradicts its values")


def _answer(llm, msgs: list[dict], purpose: str, usage: Usage, trace: Trace) -> str:
    from engine.core.routes.common import clean_answer
    from engine.floor.llm.base import call_llm

    return clean_answer(call_llm(llm, msgs, purpose=purpose, usage=usage, trace=trace, max_tokens=32).text)


def _check_answerable(cand: Candidate, question: str, answer: str, llm, usage: Usage, trace: Trace) -> None:
    """The answer's tokens occur in the chunks it must come from, or the LLM reading the
    candidate's chunks alone gets it."""
    from engine.floor.prompts.answer import answer_messages
    from engine.floor.prompts.passages import format_passages

    source = cand.chunks[-1:] if cand.kind == "bridge" else cand.chunks  # a bridge's answer is chunk B's
    if cand.kind == "comparison" or (
        normalize_answer(answer) not in _YES_NO and in_text(answer, "\n".join(c.text for c in source))
    ):
        return  # a comparison's values were checked against their chunks
    shown = [RetrievedChunk(c.id, c.doc_id, c.title, c.text, 1.0) for c in cand.chunks[:READ_MAX_CHUNKS]]
    read = _answer(llm, answer_messages(question, format_passages(shown)), "check: read", usage, trace)
    trace.details["read"] = read
    if f1(read, answer) < RIGHT_F1:
        raise Rejected("not answerable from its chunks")


def attempt(cand: Candidate, kb, llm) -> dict:
    """Write and check one question from `cand`: the row the writer stores (without its id)."""
    from training.adapt.question_prompts import closed_book_messages

    t0, usage, trace = time.perf_counter(), Usage(), Trace()
    question = answer = ""
    details: dict = {}
    try:
        question, answer, details = _write(cand, llm, usage, trace)
        if cand.kind == "bridge":
            _check_bridge(cand, question)
        if cand.kind == "single" and not names_subject(question, cand.chunks):
            raise Rejected("names no subject")
        if cand.kind == "comparison":
            _check_comparison(cand, question, answer, details)
        elif _has_phrase(question, answer):
            raise Rejected("the answer is in the question")
        _check_answerable(cand, question, answer, llm, usage, trace)
        closed = _answer(llm, closed_book_messages(question), "check: closed book", usage, trace)
        trace.details["closed_book"] = closed
        if f1(closed, answer) >= RIGHT_F1:
            raise Rejected("answerable without passages")
        status, reason = "kept", None
    except Rejected as e:
        status, reason = "rejected", str(e)
    if cand.kind == "bridge":
        details["entity"] = cand.entity
        details["answer_in_first_chunk"] = bool(answer) and in_text(answer, cand.chunks[0].text)
    for k in ("read", "closed_book"):
        if k in trace.details:
            details[k] = trace.details[k]
    if status == "rejected" and "reply" in trace.details:
        details["reply"] = trace.details["reply"]  # what the model wrote, to see why it was rejected
    if cand.node:
        details["node"] = cand.node
    return {
        "kind": cand.kind,
        "status": status,
        "reason": reason,
        "question": question,
        "answer": answer,
        "chunk_ids": list(cand.chunk_ids),
        "titles": list(cand.titles),
        "details": details,
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "seconds": round(time.perf_counter() - t0, 3),
    }
