"""Batched decoding of the local model against one call at a time, on HippoRAG-like requests.

HippoRAG 2's OpenIE asks the LLM for each passage's triples from a pool of threads; bench peers
sends the calls that arrive together as one `llm_many` request, which the local backend decodes
in one batch (engine.llm.local_batched). This measures that gain on the same requests, LLM call
cache off: the requests one at a time through `chat` (as the harness served them before), then
all of them through `chat_many`. Reported: wall time, generated tokens/s, prompt tokens
evaluated (both paths reuse a prompt prefix the model already holds: `chat` from its prefix
cache, each batched sequence from the request it served before; by default both are warmed with
requests of the same kind first, as in a long build, --cold skips that), and how many replies are
identical (greedy batched decoding rounds differently, so a near tie can pick another token).

The requests are HippoRAG 2.0.0a3's triple-extraction prompt (its template's system text, one-shot
example and frame, read from the installed package's source without importing it) over the first
passages of the shared 2Wiki file. HippoRAG feeds each passage's named entities from its own NER
call; here they are the passage's title and capitalised phrases and years (no NER call to pay for).

    python -m training.bench_batched_decode [--n 8] [--max-tokens 256] [--cold] [--out FILE]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import time
from pathlib import Path

HIPPORAG_TEMPLATES = (
    Path(__file__).resolve().parents[2] / "peers-venv-hipporag/lib/python3.11/site-packages/hipporag/prompts/templates"
)


def template_strings(path: Path) -> dict[str, str]:
    """The string constants a template module assigns (NAME = "..."), read without running it."""
    out = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            out.update({t.id: node.value.value for t in node.targets if isinstance(t, ast.Name)})
    return out


def entities(title: str, text: str) -> list[str]:
    """A stand-in for HippoRAG's NER: the title, capitalised phrases and years, in order."""
    found = [title] + re.findall(r"\b[A-Z][\w'-]*(?:\s+(?:of|the|de|[A-Z][\w'-]*))*|\b\d{4}\b", text)
    return list(dict.fromkeys(e for e in found if e not in _SENTENCE_STARTS))


_SENTENCE_STARTS = {"He", "She", "It", "His", "Her", "The", "They", "Their", "In", "This", "A", "An", "How"}


def triple_requests(n: int, templates: Path) -> list[list[dict]]:
    """HippoRAG's triple-extraction messages for the first n distinct 2Wiki passages."""
    from hierarchy.datasets import SHARED_FILES, load_dataset, shared_data_dir

    t = {**template_strings(templates / "ner.py"), **template_strings(templates / "triple_extraction.py")}
    frame = t["ner_conditioned_re_frame"]
    shot = frame.format(passage=t["one_shot_ner_paragraph"], named_entity_json=t["one_shot_ner_output"])
    passages = load_dataset(shared_data_dir() / SHARED_FILES["2wiki"]).passages[:n]
    out = []
    for p in passages:
        doc = f"{p.title}\n{p.text}"  # as bench peers hands HippoRAG a passage
        ner = json.dumps({"named_entities": entities(p.title, p.text)})
        out.append(
            [
                {"role": "system", "content": t["ner_conditioned_re_system"]},
                {"role": "user", "content": shot},
                {"role": "assistant", "content": t["ner_conditioned_re_output"]},
                {"role": "user", "content": frame.format(passage=doc, named_entity_json=ner)},
            ]
        )
    return out


def common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def run(n: int, max_tokens: int, templates: Path, warm: bool = True) -> dict:
    from engine.base.types import Completion
    from engine.llm.local import LocalLLM

    requests = triple_requests(n + (4 if warm else 0), templates)
    requests, others = requests[:n], requests[n:]
    llm = LocalLLM()
    hello = [[{"role": "user", "content": "Say hi."}], [{"role": "user", "content": "Say bye."}]]
    llm.chat(hello[0], max_tokens=2)  # the model loads here, not in a measured run
    llm.chat_many(hello, max_tokens=2)  # and the batched context
    if warm:  # as in a long build: each path has evaluated the prompt's shared part before
        llm.chat(others[0], max_tokens=1)  # into the prefix cache
        llm.chat_many(others, max_tokens=1)  # into each of the 4 sequences
    modes = {}
    for mode in ("chat", "chat_many"):
        t0 = time.perf_counter()
        if mode == "chat":
            got = [llm.chat(m, max_tokens=max_tokens) for m in requests]
        else:
            got = llm.chat_many(requests, max_tokens=max_tokens)
        wall = time.perf_counter() - t0
        done = [c for c in got if isinstance(c, Completion)]
        if len(done) != len(got):
            raise SystemExit(
                f"{mode}: {len(got) - len(done)} request(s) failed: {[str(c) for c in got if c not in done]}"
            )
        gen = sum(c.completion_tokens for c in done)
        modes[mode] = {
            "wall_s": round(wall, 2),
            "seconds_sum": round(sum(c.seconds for c in done), 2),
            "prompt_tokens": sum(c.prompt_tokens for c in done),
            "prompt_tokens_evaluated": sum(c.prompt_tokens_evaluated or 0 for c in done),
            "completion_tokens": gen,
            "gen_tok_s": round(gen / wall, 2),
            "finish": [c.finish_reason for c in done],
            "completion_tokens_each": [c.completion_tokens for c in done],
            "texts": [c.text for c in done],
        }
    a, b = modes["chat"]["texts"], modes["chat_many"]["texts"]
    same = [x == y for x, y in zip(a, b, strict=True)]
    return {
        "n": n,
        "max_tokens": max_tokens,
        "threads": llm.n_threads,
        "warm": warm,
        "modes": modes,
        "identical": sum(same),
        "first_difference_at_char": [None if s else common_prefix(x, y) for s, x, y in zip(same, a, b, strict=True)],
        "speedup_wall": round(modes["chat"]["wall_s"] / modes["chat_many"]["wall_s"], 2),
    }


def table(r: dict) -> str:
    rows = [
        "| path | wall s | generated tokens | generated tok/s | prompt tokens (evaluated) | cut at max_tokens |",
        "|---|---|---|---|---|---|",
    ]
    for mode, m in r["modes"].items():
        rows.append(
            f"| {mode} | {m['wall_s']} | {m['completion_tokens']} | {m['gen_tok_s']} | "
            f"{m['prompt_tokens']} ({m['prompt_tokens_evaluated']}) | {m['finish'].count('length')} of {r['n']} |"
        )
    return "\n".join(rows) + (
        f"\n\nchat_many {r['speedup_wall']}x faster (wall); identical replies: {r['identical']} of {r['n']}; "
        f"first differing character per reply (None: identical): {r['first_difference_at_char']}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=8, help="requests (passages)")
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--templates", type=Path, default=HIPPORAG_TEMPLATES, help="hipporag/prompts/templates")
    ap.add_argument(
        "--cold", action="store_true", help="no warm-up: the prompts' shared part is evaluated in the measured runs"
    )
    ap.add_argument("--out", type=Path, default=Path("runs/batched_decode/bench_batched_decode.json"))
    a = ap.parse_args()
    r = run(a.n, a.max_tokens, a.templates, warm=not a.cold)
    from engine.base.files import atomic_write_json

    a.out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(a.out, r)
    print(table(r))
    print(f"(full results: {a.out})")


if __name__ == "__main__":
    main()
