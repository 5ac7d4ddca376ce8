"""The chunk route's retrieval signals for the ranking check of `eval-router --lodo --kb-root`:
what one top-k search tells before any LLM call, computed from the KB each label set was
answered from."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from engine.floor.base.errors import LogicRouteError
from hierarchy.documents import Document
from hierarchy.kb import KnowledgeBase
from tests.fakes import HashedBowEmbedder
from training.fitting.lodo_cascade import logic_gain_ranking
from training.fitting.retrieval_signals import SIGNALS, kb_folder, row_signals, signals_of


def _hit(score: float, title: str, text: str):
    return SimpleNamespace(score=score, title=title, text=text)


def test_signals_measure_the_score_profile_and_what_of_the_question_the_hits_hold():
    hits = [_hit(0.8, "Ann Lee", "Ann Lee was born in 1736 in Manchester."), _hit(0.5, "Shakers", "A sect.")]
    got = signals_of("Where was Ann Lee born, and where did Tom Ford study?", hits)
    assert got["top_score"] == pytest.approx(0.8) and got["score_gap"] == pytest.approx(0.3)
    # content words: ann lee born tom ford study -> ann, lee, born found
    assert got["word_coverage"] == pytest.approx(3 / 6)
    assert got["entity_coverage"] == pytest.approx(1 / 2)  # "Ann Lee" found, "Tom Ford" not
    assert signals_of("when was it built", []) == dict.fromkeys(SIGNALS, 0.0)
    assert signals_of("when was it built", hits)["entity_coverage"] == 1.0  # no name to miss


def test_rows_are_searched_in_their_own_sets_kb_and_a_missing_kb_is_a_one_line_error(tmp_path):
    emb = HashedBowEmbedder(dim=128)
    docs = {"nq": ["Lantern Tide is held in Brae.", "Brae is a harbour town."], "medical": ["Aspirin thins blood."]}
    for name, texts in docs.items():
        kb = KnowledgeBase.create(kb_folder(tmp_path, name), emb, chunk_words=50, overlap_words=0)
        kb.add([Document(f"{name}{i}", f"{name} {i}", t) for i, t in enumerate(texts)], show_progress=False)
    rows = [
        {"dataset": "nq", "question": "where is Lantern Tide held", "k": 1},
        {"dataset": "graphrag_medical", "question": "What does Aspirin do?", "k": 1},
        {"dataset": "nq", "question": "what is Brae", "k": 1},
    ]
    got = row_signals(rows, tmp_path, emb)
    assert set(got) == set(SIGNALS) and all(len(v) == 3 for v in got.values())
    assert list(got["entity_coverage"]) == [1.0, 1.0, 1.0]
    assert list(got["score_gap"]) == [0.0, 0.0, 0.0]  # k = 1: best = k-th
    with pytest.raises(LogicRouteError, match="no knowledge base for squad"):
        row_signals([{"dataset": "squad", "question": "q?"}], tmp_path, emb)


def test_the_ranking_check_scores_every_signal_given_it():
    rows = [{"scores": {"chunk": c, "logic": g}} for c, g in ((0, 1), (0, 1), (1, 1), (1, 0))]
    got = logic_gain_ranking(rows, [0.5] * 4, {"word_coverage": [0.1, 0.2, 0.9, 0.8]})
    assert got["auc_word_coverage"] == 0.0  # low coverage ranks exactly the rows logic wins


def test_eval_router_lodo_with_a_kb_root_ranks_by_the_retrieval_signals_too(tmp_path):
    from click.testing import CliRunner

    from tests.training.fitting.test_set_priors import _label_file
    from training.fitting.cmd_eval import eval_router

    emb = HashedBowEmbedder(dim=16)
    files = [_label_file(tmp_path, d) for d in ("nq", "2wiki")]  # "Who wrote book i of <set>?"
    for name in ("nq", "2wiki"):
        kb = KnowledgeBase.create(tmp_path / "kbs" / name, emb, chunk_words=50, overlap_words=0)
        kb.add([Document(f"b{i}", f"Book {i}", f"Book {i} of {name} was written by X{i}.") for i in range(4)],
               show_progress=False)  # fmt: skip
    args = ["--lodo", "--labels", ",".join(files), "--features", "none", "--kb-root", str(tmp_path / "kbs")]
    res = CliRunner().invoke(eval_router, args, obj={"embedder": emb}, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    header = next(line for line in res.output.splitlines() if line.startswith("| left out | n | logic better"))
    assert header.endswith("| AUC top_score | AUC score_gap | AUC word_coverage | AUC entity_coverage |")
    missing = CliRunner().invoke(eval_router, [*args[:-1], str(tmp_path)], obj={"embedder": emb})
    assert isinstance(missing.exception, LogicRouteError) and "no knowledge base for" in str(missing.exception)
    assert "leaving out" not in missing.output  # refused before any fold trains
