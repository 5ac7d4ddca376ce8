"""No text in a message can become a chat template's control token.

A chat prompt is rendered by the model's template (the turns between <|im_start|> and
<|im_end|> for Qwen) and tokenized with special tokens parsed: llama-cpp-python does so in
process, and an OpenAI-compatible server (vLLM, llama.cpp server) does the same on its side. So
a document that contains "<|im_end|>\\n<|im_start|>system ..." became the real tokens 151645 and
151644 of the shipped model's vocabulary and opened a system turn of its own. Only the template
may add control tokens; the text it fills in (passages, the question, sub-questions, memory,
the few-shot examples, the model's own earlier replies) is data.

Every backend therefore sends its messages through `neutralise_messages` just before the
template, the one point every call passes whatever prompt built it. Each control sequence in a
message's text is broken by a space after its first character ("<|im_start|>" -> "< |im_start|>"),
which every tokenizer reads as plain text, and a reader still recognises.

The sequences: the markers of the common chat templates (MARKERS, and every "<|...|>" or
DeepSeek's "<｜...｜>" sequence), and, for the local model, every control or user-defined token of
its own vocabulary (`vocabulary_markers`: llama.cpp matches user-defined tokens even with special
tokens off, so tokenizing without them would not be enough).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

MARKERS = (
    # ChatML (Qwen), Llama 3, Phi-3: also caught by the "<|...|>" rule, listed for the reader
    "<|im_start|>",
    "<|im_end|>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|begin_of_text|>",
    # Llama 2, Mistral
    "[INST]",
    "[/INST]",
    "<<SYS>>",
    "<</SYS>>",
    "<s>",
    "</s>",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_CALLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    # Gemma
    "<start_of_turn>",
    "<end_of_turn>",
    "<bos>",
    "<eos>",
    # tool calls of ChatML templates
    "<tool_call>",
    "</tool_call>",
)
_PIPE_TAGS = r"<\|[^\s<>|]{1,64}\|>|<｜[^\s<>｜]{1,64}｜>"  # <|anything|>, DeepSeek's <｜anything｜>


def marker_pattern(extra: Iterable[str] = ()) -> re.Pattern[str]:
    """One pattern for MARKERS, the "<|...|>" sequences and `extra`. Sequences with whitespace
    or shorter than two characters are left out: breaking them with a space could not work."""
    literal = {m for m in (*MARKERS, *extra) if len(m) >= 2 and not any(c.isspace() for c in m)}
    longest_first = sorted(literal, key=len, reverse=True)  # a marker is broken whole, not one inside it
    return re.compile("|".join([_PIPE_TAGS, *map(re.escape, longest_first)]))


COMMON = marker_pattern()


def _broken(match: re.Match[str]) -> str:
    s = match.group()
    return f"{s[0]} {s[1:]}"


def neutralise(text: str, pattern: re.Pattern[str] = COMMON) -> str:
    """`text` with every sequence `pattern` matches broken by a space after its first character.
    Repeated until none is left: breaking one ("ab" in "abc") may leave another ("bc")."""
    while pattern.search(text):
        text = pattern.sub(_broken, text)
    return text


def neutralise_messages(messages: list[dict], pattern: re.Pattern[str] | None = None) -> list[dict]:
    """The messages with every string content neutralised (other keys and content kinds kept);
    the list and its dicts are new, the caller's are left as they were."""
    pattern = pattern or COMMON
    return [
        {**m, "content": neutralise(m["content"], pattern)} if isinstance(m.get("content"), str) else dict(m)
        for m in messages
    ]


def vocabulary_markers(llama: Any) -> list[str]:
    """The text of every control, user-defined or unknown token of a llama_cpp.Llama's vocabulary
    ('<|im_start|>', '<tool_call>', ...); [] when this llama-cpp-python cannot say (MARKERS and the
    "<|...|>" rule still hold; the real-model test checks that the vocabulary is read)."""
    try:
        import llama_cpp

        model = llama._model
        kinds = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
        kinds |= llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
        return [model.token_get_text(i) for i in range(llama.n_vocab()) if model.token_get_attr(i) & kinds]
    except Exception:  # llama-cpp-python internals differ across versions
        return []
