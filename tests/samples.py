"""Small invented inputs that several test files share: documents for a chunk-level KB, a
topic corpus for the summary layers, passages for RoutedRAG runs, and one chat call with a
JSON schema for the LLM backends."""

from __future__ import annotations

import random

from hierarchy.documents import Document

# Five one-fact documents on distinct subjects: a query about one subject has one right document.
DOCS = [
    Document("paris", "Paris", "Paris is the capital of France and sits on the Seine."),
    Document("berlin", "Berlin", "Berlin is the capital of Germany."),
    Document("tokyo", "Tokyo", "Tokyo is the capital of Japan, a large city."),
    Document("nile", "Nile", "The Nile is a long river in Africa."),
    Document("everest", "Everest", "Everest is the highest mountain on Earth."),
]

# Eight topics, each with its own small vocabulary: make_docs' documents fall into clusters by topic.
TOPICS = {
    "river": "river water delta basin flood bank",
    "mountain": "mountain peak summit climber altitude glacier",
    "film": "film director actor premiere studio screenplay",
    "football": "football club league striker goal stadium",
    "opera": "opera soprano composer libretto aria tenor",
    "volcano": "volcano eruption lava magma crater ash",
    "bank": "bank loan interest deposit credit finance",
    "ship": "ship harbour sail navy captain voyage",
}


def make_docs(n_per_topic: int = 6, topics=TOPICS, seed: int = 0, prefix: str = "") -> list[Document]:
    """n_per_topic documents per topic, four seeded random sentences each from the topic's words;
    a `prefix` gives new ids and titles."""
    rng = random.Random(seed)
    docs = []
    for t, vocab in topics.items():
        words = vocab.split()
        for j in range(n_per_topic):
            name = f"{prefix}{t.capitalize()} {j}"
            sents = []
            for _ in range(4):
                w = rng.sample(words, 3)
                count, year = rng.randint(2, 999), 1900 + rng.randint(0, 120)
                sents.append(f"The {w[0]} of {name} had {count} {w[1]} and {w[2]} in {year}.")
            docs.append(Document(f"{prefix}{t}-{j}", name, " ".join(sents)))
    return docs


# Three passages for RoutedRAG runs: a one-hop fact and the two hops of a bridge question.
PASSAGES = {
    "Curie": "Marie Curie was born in Warsaw in 1867.",
    "Nolan": "Christopher Nolan was born on 30 July 1970.",
    "Inception": "Inception is a 2010 film directed by Christopher Nolan.",
}

# One chat call with a JSON schema for its answer, for the LLM backends and their cache.
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
MSGS = [{"role": "user", "content": "What is 2+3?"}]
