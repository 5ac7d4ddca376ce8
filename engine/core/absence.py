"""When "not in the documents" is the answer.

Rules read off what an answer was made from, with no LLM call:

- `weigh_absence`: a cheap route's answer that says it has none is final unless the retrieval
  evidence says a costlier route could find it. The KB's lexical index tells whether every key
  term of the question occurs in some chunk, and the passages the route read tell whether one of
  them held all of those terms. A term no chunk holds ("sails" in a ferry handbook that never
  names them, "Kubernetes" in a language book) or a passage that held every term and still gave
  no answer keeps the absence; terms spread over chunks no single passage joins, or a multi-hop
  form whose first hop is in the KB, send the question on up the ladder.
  A lookup (a short question) of one value whose terms the KB holds apart reads the next passages
  once (the chunk route, one call) instead of climbing: one fact has nothing to decompose. A
  question asking for a list or an explanation (engine.floor.question.structure.answer_shape) climbs:
  its answer is spread over passages by nature, and a few words of its own framing no chunk holds
  ("the main treatment modalities") are no evidence that its topic is absent.
- `ungrounded_reason`: an answer never outruns its evidence. A lookup naming something no chunk
  holds ("How do I add a dependency with Cargo?" asked of a profiler's manual), a logic
  sub-answer no passage shown for it states (the grounding check,
  engine.core.routes.logic.grounding.supported), or an answer of any route naming a number, a flag or
  a key=value that neither the question nor any passage read holds, turns the answer into "not
  in the documents", saying what was found.
- `off_question_reason`: an answer found after cheaper routes said "not in the documents" takes
  its specific words from a passage about the question.

RagConfig.keep_absence turns the first off (every absence climbs the ladder);
RagConfig.abstain_ungrounded the other two (answers are returned as the routes gave them).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engine.core.routes.specifics import holds_as_written, plain, specific_words, unread_words
from engine.floor.base.errors import KBError
from engine.floor.base.types import Answer
from engine.floor.prompts.answer import NOT_IN_DOCUMENTS
from engine.floor.question.parse import Question, as_question, key_terms, word_family

if TYPE_CHECKING:
    from hierarchy.kb import KnowledgeBase


def _in_kb(lexical, term: str) -> bool:
    return any(lexical.document_frequency(w) for w in word_family(term))


def weigh_absence(kb: "KnowledgeBase", question: str | Question, retrieved_ids: Sequence[str]) -> dict:
    """{"climb": bool, "reason": str, ...the evidence}: whether an answer of a cheap route that
    says it has none should go up the ladder, from the KB's lexical index and the passages the
    route read (`retrieved_ids`). "look_further": True (with climb False) when the chunk route
    should read the next passages by rank once instead: a lookup whose terms the KB holds apart."""
    question = as_question(question)
    terms = list(question.key_terms)
    try:
        lexical = kb.lexical_index()
    except KBError:  # a KB written before lexical retrieval: nothing to weigh, the ladder as before
        return {"climb": True, "reason": "the KB has no lexical index to weigh the evidence with"}
    missing = [t for t in terms if not _in_kb(lexical, t)]
    evidence: dict = {"terms": terms, "missing": missing}
    plan = question.form_plan
    if plan is not None:
        form, hops = plan
        hop_missing = [t for t in key_terms(hops[0]) if not _in_kb(lexical, t)]
        evidence["form"] = form
        if not hop_missing:
            return {"climb": True, "reason": f"a {form} question whose first hop is in the KB", **evidence}
        return {"climb": False, "reason": f"a {form} question whose first hop names {_listed(hop_missing)}, "
                "which no chunk holds", **evidence}  # fmt: skip
    if not terms:
        return {"climb": False, "reason": "the question has no term to look for", **evidence}
    shape = question.shape
    evidence["shape"] = shape
    if missing and _asks_a_lookup(question, terms):
        # A list or an explanation is asked for in words of its own ("the main treatment
        # modalities", "according to the ontology"): a few such words no chunk holds frame the
        # request; a name no chunk holds, or most of the terms, still mean the topic is absent.
        if shape == "value" or unheld_names(kb, question) or 2 * len(missing) >= len(terms):
            return {"climb": False, "reason": f"no chunk of the KB holds {_listed(missing)}", **evidence}
        return {"climb": True, "reason": f"it asks for {_SHAPE_WORDS[shape]}: {_listed(missing)}, which no chunk "
                "holds, frame the request", **evidence}  # fmt: skip
    best = _best_coverage(kb, question.term_families, retrieved_ids)
    evidence["best_passage_terms"] = best
    if best == len(terms):
        return {"climb": False, "reason": "a passage read holds every key term and answered nothing", **evidence}
    spread = f"every key term is in the KB, but no passage read holds them all (at most {best} of {len(terms)})"
    if _asks_a_lookup(question, terms) and shape == "value":
        # One fact asked for: the next passages by rank are where it would be; a decomposition
        # has nothing to decompose (on the doc sets' tune and judge halves, 13 climbs of lookups
        # found 1 right answer and answered 3 negatives).
        return {"climb": False, "look_further": True, "reason": f"{spread}: a lookup, the next passages are read once",
                **evidence}  # fmt: skip
    if shape != "value":
        # A list or an explanation is spread over passages by nature: the next ones by rank hold a
        # part of it at best, where the summary and logic routes gather it (GraphRAG-Bench
        # Medical's requests, docs/results/docs/absence_round_two.md).
        return {"climb": True, "reason": f"{spread}: it asks for {_SHAPE_WORDS[shape]}", **evidence}
    return {"climb": True, "reason": spread, **evidence}


_SHAPE_WORDS = {"list": "a list", "explanation": "an explanation"}
# A request with more key terms than this names its task as much as its facts ("Rewrite the
# guideline into a formal discharge summary for ..."): a word of its framing no chunk holds is no
# evidence that the facts are absent. Off-topic questions and near misses on documentation sets
# have at most 10.
LOOKUP_MAX_TERMS = 12


def _asks_a_lookup(question: Question, terms: list[str]) -> bool:
    """A question (it ends with "?") short enough that a term no chunk holds means its fact is not there."""
    return question.text.rstrip().endswith("?") and len(terms) <= LOOKUP_MAX_TERMS


def _best_coverage(kb: "KnowledgeBase", families: list[set[str]], ids: Sequence[str]) -> int:
    """The most key terms (given by their word families) one of the passages `ids` holds (title,
    heading path and text)."""
    from engine.floor.words import tokens
    from hierarchy.lexical import lexical_text

    best = 0
    for cid in ids:
        chunk = kb.chunks.get(cid)
        if chunk is not None:
            held = set(tokens(lexical_text(chunk)))
            best = max(best, sum(1 for f in families if f & held))
    return best


def _listed(terms: list[str]) -> str:
    return ", ".join(f"'{t}'" for t in terms[:5]) + (f" and {len(terms) - 5} more" if len(terms) > 5 else "")


# A name in a question: a capitalised word (Cargo, PyPI, FIFA) that does not open a sentence.
_NAME = re.compile(r"(?<![.!?:]\s)(?<!^)\b[A-Z][\w.+#-]*")


def unheld_names(kb: "KnowledgeBase", question: str | Question) -> list[str]:
    """The names a lookup question asks about that no chunk of the KB holds ("Cargo" asked of
    Valgrind's manual): whatever is answered about them comes from the model, not the documents.
    Empty for a request (not a lookup) and for a KB without a lexical index."""
    from engine.floor.words import tokens

    question = as_question(question)
    if not _asks_a_lookup(question, question.key_terms):
        return []
    try:
        lexical = kb.lexical_index()
    except KBError:
        return []
    names = [m.group(0).rstrip(".") for m in _NAME.finditer(question.text.strip())]
    return [n for n in dict.fromkeys(names) if any(not _in_kb(lexical, t) for t in tokens(n) if len(t) > 1)]


def ungrounded_reason(kb: "KnowledgeBase", question: str | Question, answer: Answer) -> str | None:
    """Why an answer outruns its evidence, or None when it does not: the question names
    something no chunk holds, a logic sub-answer is stated by none of its passages, or specific
    words of the answer are held by nothing read."""
    question = as_question(question)
    names = unheld_names(kb, question)
    if names:
        return f"the question names {_listed(names)}, which no chunk of the KB holds"
    dag = answer.trace.dag or {}
    bad = [n for n in dag.get("nodes", []) if n.get("supported") is False]
    if bad:
        listed = "; ".join(f"{n.get('id')} {n.get('question', '')!r} -> {n.get('answer', '')!r}" for n in bad[:3])
        return f"sub-answer stated by none of its passages ({listed})"
    read = " ".join(_read_texts(kb, answer))
    unread = unread_words(answer.text, f"{question.text} {read}")
    if unread:
        return f"the answer names {_listed(unread)}, which neither the question nor any passage read holds"
    return None


def retrieved_ids(answer: Answer) -> list[str]:
    """The chunk ids a cheap route shows in trace.retrieved."""
    return [r["chunk_id"] for r in answer.trace.retrieved or [] if isinstance(r, dict) and r.get("chunk_id")]


def _read_texts(kb: "KnowledgeBase", answer: Answer) -> list[str]:
    """The text of every passage the route read: a cheap route's retrieved chunks, the logic
    route's steps' chunks."""
    ids = retrieved_ids(answer)
    ids += [cid for s in answer.trace.details.get("steps", []) for cid in s.get("chunk_ids", [])]
    out = []
    for cid in dict.fromkeys(ids):
        chunk = kb.chunks.get(cid)
        if chunk is not None:
            out.append(f"{chunk.heading_path or chunk.title} {chunk.text}")
    return out


def off_question_reason(kb: "KnowledgeBase", question: str | Question, answer: Answer) -> str | None:
    """Why an answer found after cheaper routes said "not in the documents" is taken from passages
    about something else, or None. A passage is about the question when it holds at least half of
    the key terms of the question or of a sub-question the logic route asked: one passage read
    must be, and each specific word of the answer must be held by one that is (the number a
    passage gives for another option is no answer). A multi-hop form is not checked: its answer
    sits in a later hop's passage."""
    from engine.floor.words import tokens

    question = as_question(question)
    if not question.key_terms or question.form_plan is not None:
        return None
    # what a passage may be about: the question, or a sub-question the logic route asked on the way
    # (a plan of one node restates the question: no hop of its own)
    nodes = (answer.trace.dag or {}).get("nodes", [])
    hops = [n.get("rewritten") or n.get("question") or "" for n in nodes] if len(nodes) > 1 else []
    topics = [question.term_families] if question.key_terms else []
    topics += [[word_family(t) for t in terms] for terms in map(key_terms, hops) if terms]

    def about(held: set[str]) -> bool:
        return any(2 * sum(1 for f in fams if f & held) >= len(fams) for fams in topics)

    read = [(plain(t), set(tokens(t))) for t in _read_texts(kb, answer)]
    if read and not any(about(held) for _, held in read):
        return "none of the passages read is about the question (none holds half its key terms)"
    for w in specific_words(answer.text):
        holding = [held for text, held in read if holds_as_written(text, w)]
        if holding and not any(about(held) for held in holding):
            return f"the answer's {w!r} comes from passages about something else (none holds half the question's terms)"
    return None


def abstained(answer: Answer, why: str, style: str) -> Answer:
    """`answer` turned into "not in the documents": the text says so (with what was found, in the
    reader style), the first text stays in the trace, and a flag says why."""
    found = answer.text.strip()
    answer.trace.details["ungrounded"] = {"answer": found, "reason": why}
    answer.trace.flag(f"answer withheld: {why}")
    if style == "reader" and found:
        answer.text = f"{NOT_IN_DOCUMENTS} (The passages read do not support the answer found: {why}.)"
    else:
        answer.text = NOT_IN_DOCUMENTS if style == "reader" else NOT_IN_DOCUMENTS.rstrip(".").lower()
    return answer
