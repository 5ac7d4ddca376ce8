"""The logic route's test setup, shared by its spec files: a tiny invented corpus on a
keyword-overlap fake KB, builders of the scripted plan / step / reflection replies, the
canonical chain and comparison questions, and readers of the answer's trace."""

from __future__ import annotations

from hierarchy.documents import Chunk
from tests.fakes import HashedBowEmbedder, WordOverlapKB

CORPUS = {
    "c1": "Jaws (film): Jaws is a 1975 thriller film directed by Steven Spielberg.",
    "c2": "Steven Spielberg: Steven Spielberg was born on December 18, 1946 in Cincinnati.",
    "c3": "Vertigo (film): Vertigo is a 1958 film directed by Alfred Hitchcock.",
    "c4": "Alfred Hitchcock: Alfred Hitchcock was born on 13 August 1899 in London.",
    "c5": "Ann Lee: Ann Lee was born in 1936 in Manchester.",
    "c6": "Tom Ford: Tom Ford was born in 1961 in Austin.",
    "c7": "Metropolis (film): Metropolis is a 1927 film directed by Fritz Lang.",
}


def corpus_kb() -> WordOverlapKB:
    """CORPUS ("Title: text" by chunk id), each chunk its own document."""
    return WordOverlapKB(Chunk(cid, cid, *p.split(": ", 1), 0) for cid, p in CORPUS.items())


def lean_kb() -> WordOverlapKB:
    """corpus_kb with a bag-of-words embedder, for the evidence compression of the lean settings."""
    kb = corpus_kb()
    kb.embedder = HashedBowEmbedder()
    return kb


def plan(*nodes):
    return {"subquestions": [{"id": i, "question": q, "depends_on": d} for i, q, d in nodes]}


def step(answers, memory="m"):
    return {"memory": memory, "answers": answers}


SUFFICIENT = {"sufficient": True, "missing": []}


CHAIN_PLAN = plan(("q1", "Who is the director of film Jaws?", []), ("q2", "When was #q1 born?", ["q1"]))


CHAIN_Q = "When was the director of film Jaws born?"


COMPARE_PLAN = plan(("q1", "When was Ann Lee born?", []), ("q2", "When was Tom Ford born?", []))


COMPARE_Q = "Who was born first, Ann Lee or Tom Ford?"


def purposes(ans):
    return [c["purpose"] for c in ans.trace["llm_calls"]]


def node(ans, i):
    return next(n for n in ans.trace["dag"]["nodes"] if n["id"] == i)
