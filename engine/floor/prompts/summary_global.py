"""The summary route's global mode (engine.core.routes.summary_global): the map call that lists, from
one batch of short passages, the items answering a question about the whole corpus, each with
the number of the passage it came from. Code merges the batches' items (the reduce), so the
model only reads and names, which the small local model does far better than writing a list.

One neutral example (recipes) shows the two things the model gets wrong without it: an item may
be named by its passage's title, and a passage that does not answer gives no item."""

from __future__ import annotations

import json

from engine.floor.prompts.passages import passages_section, with_data_rule

MAP_SYSTEM = (
    "You find, in the given passages, every item that answers a question asking for a list "
    "(commands, options, functions, modules, tools, chapters or other names). Each passage starts "
    "with its title. For each item give its name exactly as the passage writes it, and the number "
    "of the passage that shows it belongs in the answer. Go through every passage. List nothing "
    "that no passage supports; if no passage answers, give an empty list."
)

# Bounded so that one reply fits the completion cap: the grammar stops the list here.
MAX_ITEMS = 30
MAP_SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "maxItems": MAX_ITEMS,
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 80},
                    "passage": {"type": "integer", "minimum": 1},
                },
                "required": ["name", "passage"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["items"],
    "additionalProperties": False,
}

_EXAMPLE_PASSAGES = (
    "[1] Pancakes > Ingredients: flour, milk, eggs, butter\n"
    "[2] Green salad > Ingredients: lettuce, olive oil, lemon\n"
    "[3] Shortbread > Ingredients: butter, sugar, flour"
)
MAP_FEWSHOT = [
    {
        "role": "user",
        "content": passages_section(_EXAMPLE_PASSAGES) + "\n\nQuestion: Which recipes use butter?\nItems:",
    },
    {
        "role": "assistant",
        "content": json.dumps({"items": [{"name": "Pancakes", "passage": 1}, {"name": "Shortbread", "passage": 3}]}),
    },
]


def map_messages(question: str, passages: str) -> list[dict]:
    """The map call over one batch of numbered passages ("[n] title: text" lines)."""
    body = passages_section(passages) + f"\n\nQuestion: {question}\nItems:"
    return [{"role": "system", "content": with_data_rule(MAP_SYSTEM)}, *MAP_FEWSHOT, {"role": "user", "content": body}]
