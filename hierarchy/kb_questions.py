"""Questions about a knowledge base made from its own headings and titles, with no model: what a
user of these documents asks looks like them. The out-of-distribution guard adds them to its
reference set (router.kb_router), so a question about the user's documents is not taken for one
unlike anything the router knows just because the router was trained on other topics.

Only the standard library: importing this is free.
"""

from __future__ import annotations

import random
import re

from engine.floor.base.types import HEADING_SEP

MAX_QUESTIONS = 600  # a seeded sample above this: the guard's embedding batch stays a few seconds
_MAX_WORDS = 10  # a longer "heading" is a sentence a converter took for one
# the forms a newcomer's documentation questions take, one topic each
TEMPLATES = (
    "What is {topic}?",
    "How do I use {topic}?",
    "What does the documentation say about {topic} in {doc}?",
)


def _clean(text: str) -> str:
    t = re.sub(r"[`*_#]+", "", text)
    return " ".join(t.split()).strip(" :.-")


def topics(chunks) -> list[tuple[str, str]]:
    """(topic, document title) once each: every heading of every chunk's heading path and every
    document title, in the KB's order."""
    seen: dict[tuple[str, str], None] = {}
    for c in chunks:
        doc = _clean(c.title)
        for part in [c.title, *(c.heading_path or "").split(HEADING_SEP)]:
            topic = _clean(part)
            if topic and len(topic.split()) <= _MAX_WORDS and any(ch.isalpha() for ch in topic):
                seen.setdefault((topic, doc or topic), None)
    return list(seen)


def heading_questions(chunks, limit: int = MAX_QUESTIONS, seed: int = 0) -> list[str]:
    """Questions made from the topics of `chunks` (a KB's chunks), at most `limit`, seeded."""
    qs = [t.format(topic=topic, doc=doc) for topic, doc in topics(chunks) for t in TEMPLATES]
    qs = list(dict.fromkeys(qs))
    if len(qs) > limit:
        keep = set(random.Random(seed).sample(range(len(qs)), limit))
        qs = [q for i, q in enumerate(qs) if i in keep]
    return qs
