"""bench global's derived rows and ceilings (training/global_qa/bench_global_routed.py,
training/global_qa/bench_global_context.py): the router's and the oracle's rows come from the answers
already made, and the locality ceiling is the best coverage one text can give."""

from __future__ import annotations

import pytest

from tests.fakes import HashedBowEmbedder
from tests.training.global_qa.test_bench_global import TYPES, BenchLLM, config, rows
from training.common.answer_scores import coverage
from training.global_qa.bench_global import main
from training.global_qa.bench_global_report import report_markdown


@pytest.fixture
def emb():
    return HashedBowEmbedder(dim=128)


def test_the_locality_ceiling_is_the_best_coverage_of_the_answer_by_one_text_of_the_pool():
    from types import SimpleNamespace

    from training.global_qa.bench_global_context import _best_mean

    pool = ["The river Rhine flows north.", "A river is water.", "Nothing here."]
    qs = [SimpleNamespace(answers=["The Rhine flows north into the sea."]), SimpleNamespace(answers=["Water, water."])]
    want = [max(coverage(x, q.answers) for x in pool) for q in qs]
    assert _best_mean(pool, qs) == round(100 * sum(want) / 2, 1) and want == [0.6, 0.5]


# ---------------------------------------------------------------- router and oracle rows


def _router_checkpoint(path, dim: int = 128):
    """A router (random weights, seeded) for the tests' HashedBowEmbedder."""
    import torch

    from router.checkpoint import save_checkpoint
    from router.model import RouterConfig, RouterMLP

    torch.manual_seed(0)
    m = RouterMLP(RouterConfig(routes=("chunk", "summary", "logic"), embed_dim=dim, features=(), hidden=(8, 4)))
    save_checkpoint(path, m, {"embedder": {"id": "fake-bow", "dim": dim}})
    return str(path)


def _row(system, qid, score, tokens, type_="Contextual Summarize"):
    return {
        "system": system,
        "qid": qid,
        "type": type_,
        "rouge_l": score,
        "prompt_tokens": tokens,
        "completion_tokens": 0,
    }


def test_the_oracle_picks_the_best_answer_ties_to_the_fewest_tokens_and_the_router_its_own_pick():
    from training.global_qa.bench_global_routed import route_shares, routed_rows

    rows = [
        *(_row(s, "a", x, t) for s, x, t in (("chunk", 0.2, 900), ("summary", 0.5, 1000), ("logic", 0.5, 4000))),
        *(_row(s, "b", x, t) for s, x, t in (("chunk", 0.3, 900), ("summary", 0.1, 1000), ("logic", 0.6, 4000))),
        _row("chunk", "c", 0.9, 900),  # only chunk answered c: no routed row
    ]
    decisions = {q: {"route": r, "probs": {}} for q, r in (("a", "chunk"), ("b", "logic"), ("c", "chunk"))}
    got = {(r["system"], r["qid"]): r for r in routed_rows(rows, decisions)}
    assert set(got) == {("oracle", "a"), ("router", "a"), ("oracle", "b"), ("router", "b")}
    assert got["oracle", "a"]["picked"] == "summary" and got["oracle", "a"]["rouge_l"] == 0.5
    assert got["oracle", "b"]["picked"] == "logic"
    assert got["router", "a"]["rouge_l"] == 0.2 and got["router", "b"]["prompt_tokens"] == 4000
    assert route_shares(list(got.values()), ["Contextual Summarize"]) == {
        "Contextual Summarize": {"chunk": 1, "logic": 1}
    }


def test_with_chunk_summary_and_logic_run_the_report_adds_the_routers_and_the_oracles_rows(tmp_path, emb):
    cfg = config(tmp_path, systems=("chunk", "summary", "logic"), checkpoint=_router_checkpoint(tmp_path / "r.ckpt"))
    llm = BenchLLM()
    report = main(cfg, llm=llm, embedder=emb, show_progress=False)
    calls = len(llm.calls)
    assert report["systems"] == ["chunk", "summary", "logic", "router", "oracle"]
    by = {(r["system"], r["qid"]): r for r in rows(cfg)}
    for t in TYPES:
        per = report["per_type"][t]
        assert per["oracle"]["rouge_l"] >= max(per[s]["rouge_l"] for s in ("chunk", "summary", "logic"))
        assert sum(report["routing"]["shares"][t].values()) == per["router"]["n"] == 2
    assert set(report["vs_chunk"]["Contextual Summarize"]) == {"summary", "logic", "router", "oracle"}
    assert "router" not in report["verdict"] and "oracle" not in report["verdict"]
    md = report_markdown(report)
    assert "The router's picks" in md and "| router |" in md
    assert len(by) == 3 * 6 and calls == len(llm.calls)  # the rows made no answer of their own


def test_a_router_that_cannot_run_leaves_the_oracle_and_says_why(tmp_path, emb):
    other = _router_checkpoint(tmp_path / "r.ckpt", dim=64)  # trained for another embedder width
    report = main(
        config(tmp_path, systems=("chunk", "summary", "logic"), checkpoint=other),
        llm=BenchLLM(),
        embedder=emb,
        show_progress=False,
    )
    assert "router" not in report["systems"] and "oracle" in report["systems"]
    assert "dim" in report["routing"]["error"] and "router not run" in report_markdown(report)
    only_chunk = main(
        config(tmp_path / "c", systems=("chunk", "summary")), llm=BenchLLM(), embedder=emb, show_progress=False
    )
    assert only_chunk["systems"] == ["chunk", "summary"] and "need the systems" in only_chunk["routing"]["skipped"]
