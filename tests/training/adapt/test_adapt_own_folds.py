"""`bench adapt --own-folds K` (training.adapt.adapt_own_folds): a left-out set's real questions given to
`adapt` K-fold as the user's own, on a tiny KB with scripted routes. Each real question is judged
once per split by the router adapted without it, the folds are seeded, the real questions'
answers are replayed from their label rows (the LLM never hears them), the KB keeps the router it
had, and without --own-folds the bench's report is what it was."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial

import pytest

from engine.floor.base.errors import LogicRouteError
from hierarchy.datasets import Question
from router.kb_router import ADAPTED, MANIFEST_ENTRY
from tests.fakes import HashedBowEmbedder
from tests.training.adapt_setup import (
    ROUTES,
    ScriptedWriter,
    embedder,
    question,
    route_llm,
    runner,
    small_generalist,
    tiny_kb,
)
from training.adapt.adapt import adapt
from training.adapt.adapt_labels import AGREEMENT_METRIC, OWN
from training.adapt.adapt_own_folds import OWN as OWN_SYSTEM
from training.adapt.adapt_own_folds import TITLE, OwnFoldsRun, ReplayRunner, fold_split, own_folds
from training.adapt.adapt_verdict import CONFIDENCE, GENERALIST
from training.fitting.lodo import judge
from training.labels.label_scorers import LabelConfig
from training.labels.labels import make_row

WRITTEN = [question(i, "volcano", "bridge") for i in range(6)] + [question(i, "bank") for i in range(6)]
RIGHT = {"logic": {"volcano", "bank"}, "chunk": {"bank"}}  # the written questions' scripted routes
FAST = {"lr": 3e-3}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def real_rows(n: int = 10) -> list[dict]:
    """Label rows of n real questions as a label run left them: chunk agrees with logic on the
    bank questions (and is right there, confidently), not on the volcano ones."""
    cfg = LabelConfig(scorer="answer", routes=ROUTES, llm="fake", style="short")
    costs = {
        "chunk": {"llm_calls": 1, "tokens": 500, "prompt_tokens": 490, "completion_tokens": 10, "seconds": 1.0},
        "summary": {"llm_calls": 1, "tokens": 600, "prompt_tokens": 590, "completion_tokens": 10, "seconds": 1.0},
        "logic": {"llm_calls": 4, "tokens": 2000, "prompt_tokens": 1900, "completion_tokens": 100, "seconds": 5.0},
    }
    rows = []
    for i in range(n):
        topic = ("volcano", "bank")[i % 2]
        q = Question(f"real{i}", f"Which {topic} holds item {100 + i}?", [f"a{i}"], None, [], "realset")
        chunk = f"a{i}" if topic == "bank" else "unknown"
        extra = {
            "answers_pred": {"chunk": chunk, "summary": "unknown", "logic": f"a{i}"},
            "confidence": {"chunk": 0.9 if topic == "bank" else 0.3},
            "flags": {"logic": ["a repaired plan"]},
        }
        scores = {"chunk": float(topic == "bank"), "summary": 0.0, "logic": 1.0}
        rows.append(make_row(q, scores, {r: dict(c) for r, c in costs.items()}, cfg, index=i, extra=extra))
    return rows


def test_folds_are_seeded_and_put_each_question_in_exactly_one_fold():
    folds = fold_split(11, 3, seed=0)
    assert sorted(i for f in folds for i in f) == list(range(11)) and sorted(map(len, folds)) == [3, 4, 4]
    assert fold_split(11, 3, seed=0) == folds and fold_split(11, 3, seed=1) != folds
    for k in (1, 12):
        with pytest.raises(LogicRouteError, match="folds"):
            fold_split(11, k, seed=0)


def test_a_real_question_is_replayed_from_its_label_row_and_a_written_one_goes_to_the_route(tmp_path):
    rows, llm = real_rows(2), route_llm(RIGHT)
    replay = ReplayRunner(rows, fallback=runner)
    ans = replay("chunk", "  Which bank   holds item 101? ", None, llm)  # spaced as a questions file may hold it
    assert ans.text == "a1" and ans.trace.confidence == 0.9 and llm.calls == []
    assert (ans.usage.llm_calls, ans.usage.prompt_tokens, ans.usage.completion_tokens) == (1, 490, 10)
    assert replay("logic", rows[0]["question"], None, llm).flags == ["a repaired plan"]
    written = replay("logic", WRITTEN[0].question, None, llm)
    assert written.text == WRITTEN[0].answer and len(llm.calls) == 2  # the scripted logic route: two calls
    assert (replay.replayed, replay.answered) == (2, 1)
    rows[0]["answers_pred"].pop("summary")
    with pytest.raises(LogicRouteError, match="summary on real0"):  # a route that had no answer fails as it did
        replay("summary", rows[0]["question"], None, llm)


@pytest.fixture(scope="module")
def folded(tmp_path_factory):
    """The main adaptation of a tiny KB (written questions only), then own_folds with K=2 over
    two split seeds: (work, real rows, the result, the LLM's calls before and after the folds,
    the KB's router and manifest entry before the folds)."""
    tmp = tmp_path_factory.mktemp("own")
    emb, work = embedder(), tmp / "set"
    generalist = small_generalist(tmp / "generalist.ckpt", emb)
    kb = tiny_kb(tmp / "kb", emb)
    llm = route_llm(RIGHT)
    adapt_fn = partial(adapt, writer=ScriptedWriter(WRITTEN))
    options = {"n": 12, "embedder": emb, "progress": False}
    adapt_fn(kb.path, llm, generalist=generalist, out=work / "adapt", runner=runner, train_options=FAST, **options)
    before = len(llm.calls)
    kept = ((kb.path / ADAPTED).read_bytes(), json.loads((kb.path / "manifest.json").read_text())[MANIFEST_ENTRY])
    rows = real_rows()
    routes = list(ROUTES)
    systems = {GENERALIST: judge(rows, ["chunk"] * len(rows), routes)}
    systems |= {f"always {r}": judge(rows, [r] * len(rows), routes) for r in routes}
    run = OwnFoldsRun(rows, routes, ["chunk"] * len(rows), adapt_fn, options, fallback=runner, split_seeds=(0, 1))
    result = own_folds(kb, llm, generalist, work, 2, run, systems, echo=lambda s: None)
    return work, rows, result, (before, len(llm.calls)), kept, kb.path


def test_each_real_question_is_judged_once_per_split_by_a_router_adapted_without_it(folded):
    work, rows, result, _, _, _ = folded
    assert [s["seed"] for s in result["splits"]] == [0, 1]
    for split in result["splits"]:
        judged = [i for f in split["folds"] for i in f["judged"]]
        assert sorted(judged) == list(range(len(rows)))  # once each
        for f in split["folds"]:
            out = work / "own_folds" / f"split{split['seed']}" / f"fold{f['fold']}"
            given = [json.loads(line)["question"] for line in (out / "own_questions.jsonl").read_text().splitlines()]
            labelled = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
            own = [r["question"] for r in labelled if r["dataset"] == OWN]
            mine = {rows[i]["question"] for i in f["judged"]}
            assert sorted(own) == sorted(given) and len(given) == len(rows) - len(mine)
            assert not mine & set(given)  # the router judged on its fold never saw one of its questions
            assert (out / "adapted.ckpt").is_file()
        assert split["router"]["n"] == split["escalating"]["n"] == len(rows)
    assert result["systems"][OWN_SYSTEM]["score"] == round(sum(s["router"]["score"] for s in result["splits"]) / 2, 1)
    assert result["min_score"][OWN_SYSTEM] == min(s["router"]["score"] for s in result["splits"])
    assert (
        result["verdict"]["system"] == OWN_SYSTEM and result["verdict_escalating"]["system"] == OWN_SYSTEM + CONFIDENCE
    )


def test_the_real_questions_are_labelled_by_agreement_from_replayed_answers_with_no_llm_call(folded):
    work, rows, result, (before, after), _, _ = folded
    assert after == before  # written rows copied from the main adaptation, real answers replayed
    assert result["replayed_only"]
    for f in result["splits"][0]["folds"]:
        assert f["answered"] == 0 and f["replayed"] == 2 * f["given"]  # chunk and logic (no summary layers)
    labelled = [json.loads(line) for line in (work / "own_folds/split0/fold0/labels.jsonl").read_text().splitlines()]
    by_text = {r["question"]: r for r in rows}
    for r in (r for r in labelled if r["dataset"] == OWN):
        real = by_text[r["question"]]
        assert r["metric"] == AGREEMENT_METRIC and r["costs"]["logic"]["tokens"] == 2000
        assert r["scores"]["chunk"] == real["scores"]["chunk"]  # chunk agrees with logic exactly where right
        assert r["confidence"] == real["confidence"]


def test_the_kb_keeps_the_router_it_had_before_the_folds(folded):
    _, _, _, _, (ckpt, entry), kb_path = folded
    assert (kb_path / ADAPTED).read_bytes() == ckpt
    assert json.loads((kb_path / "manifest.json").read_text())[MANIFEST_ENTRY] == entry


def test_a_kb_without_a_router_before_the_folds_has_none_after_them(tmp_path):
    from hierarchy.kb import KnowledgeBase
    from router.kb_router import remember, remembered_checkpoint
    from training.adapt.adapt_own_folds import kept_kb_router

    emb = embedder()
    kb = tiny_kb(tmp_path / "kb", emb)
    with kept_kb_router(kb.path, emb):
        (kb.path / ADAPTED).parent.mkdir(exist_ok=True)
        (kb.path / ADAPTED).write_bytes(b"a fold's router")
        remember(kb, kb.path / ADAPTED, {"from": "a fold"})
    assert not (kb.path / ADAPTED).exists()
    assert remembered_checkpoint(KnowledgeBase.open(kb.path, emb)) is None


def test_without_own_folds_the_bench_report_is_as_it_was(tmp_path):
    from tests.training.adapt.test_bench_adapt import CFG, TOPICS, always_logic_adapt, write_set
    from training.adapt.bench_adapt import BenchAdaptSettings, bench_adapt

    emb = HashedBowEmbedder(dim=32)
    files = {d: write_set(tmp_path, d, names) for d, names in TOPICS.items()}
    settings = BenchAdaptSettings(
        llm=None, n=7, embedder=emb, cfg=CFG, adapt_fn=always_logic_adapt(tmp_path, emb, []), seeds=(0,),
        data={d: data for d, (data, _) in files.items()}, progress=False, echo=lambda s: None,
    )  # fmt: skip
    labels = [label for _, label in files.values()]
    report = bench_adapt(["films"], labels, tmp_path / "work", tmp_path / "out", settings)
    md = (tmp_path / "out" / "report.md").read_text()
    assert "own_folds" not in report and "own_folds" not in report["sets"]["films"]
    assert TITLE not in md and "own questions" not in md
    folded = bench_adapt(["films"], labels, tmp_path / "work", tmp_path / "out2", replace(settings, own_folds=2))
    md = (tmp_path / "out2" / "report.md").read_text()
    assert folded["sets"]["films"]["own_folds"]["folds"] == 2 and f"### {TITLE}" in md
    assert (tmp_path / "work" / "films" / "own_folds" / "split2" / "fold1" / "own_questions.jsonl").is_file()


def test_more_folds_than_real_questions_fail_the_set_before_any_adaptation(tmp_path):
    from tests.training.adapt.test_bench_adapt import CFG, TOPICS, always_logic_adapt, write_set
    from training.adapt.bench_adapt import BenchAdaptSettings, bench_adapt

    emb, calls = HashedBowEmbedder(dim=32), []
    files = {d: write_set(tmp_path, d, names) for d, names in TOPICS.items()}
    report = bench_adapt(
        ["films"], [label for _, label in files.values()], tmp_path / "work", tmp_path / "out",
        BenchAdaptSettings(
            llm=None, n=7, embedder=emb, cfg=CFG, adapt_fn=always_logic_adapt(tmp_path, emb, calls), seeds=(0,),
            progress=False, data={d: data for d, (data, _) in files.items()}, echo=lambda s: None, own_folds=9,
        ),
    )  # fmt: skip
    assert "9 folds of 8 questions" in report["sets"]["films"]["error"]
    assert calls == []  # the set's adaptation (hours of labelling for a real set) never started
