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

# PASSAGES and the facts the CLI tests' questions ask about (Eiffel Tower, Peru, Emma): an answer
# about a name no chunk holds is withheld (engine.core.absence.unheld_names).
PASSAGES_NAMING_THEM = {
    **PASSAGES,
    "Eiffel Tower": "The Eiffel Tower stands in Paris.",
    "Peru": "Lima is the capital of Peru.",
    "Emma": "Emma is a novel by Jane Austen.",
}

# One chat call with a JSON schema for its answer, for the LLM backends and their cache.
SCHEMA = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
MSGS = [{"role": "user", "content": "What is 2+3?"}]

# Five invented documents for a two-hop question whose second hop's passage the first hop also
# reads: "Where was the mayor of Velmora born?" (Kesh). Tamsin Aldrey, born in Velmora, is the
# distractor a second hop sees when the mayor's page is held back from it.
VELMORA = [
    Document(
        "velmora",
        "Velmora",
        "Velmora is a river city in the northern province of Ardun, known for its glassworks and its stone "
        "bridges. The mayor of Velmora is Odile Brankov, elected in 2019. The city council meets in the old "
        "customs hall by the river.",
    ),
    Document(
        "copper-herons",
        "The Copper Herons",
        "The Copper Herons are a folk band from Velmora, founded in 2008. The band played at the inauguration "
        "of the mayor of Velmora in 2019 and tours the river towns of Ardun every summer.",
    ),
    Document(
        "odile-brankov",
        "Odile Brankov",
        "Odile Brankov is a politician who has been the mayor of Velmora since 2019. She was born in Kesh, a "
        "mountain village, and studied law in the capital before moving to Velmora in 2001.",
    ),
    Document(
        "tamsin-aldrey",
        "Tamsin Aldrey",
        "Tamsin Aldrey is a painter born in Velmora in 1962. Her paintings of the river bridges hang in the "
        "city museum, and she taught at the Velmora art school for twenty years.",
    ),
    Document(
        "kesh",
        "Kesh",
        "Kesh is a mountain village in the south of Ardun, with about 900 inhabitants. It is known for its "
        "cheese market and for the pass road that crosses the Ardun range above it.",
    ),
]
