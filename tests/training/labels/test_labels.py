"""Router labels: preference vectors, the retrieval and answer scorers, the label file
(round trip, resume without duplicates, torn last line), training targets."""

from __future__ import annotations

import json

import numpy as np
import pytest

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.types import Answer, RetrievedChunk, Usage
from hierarchy.datasets import Question
from hierarchy.documents import Chunk
from tests.fakes import WordOverlapKB
from training.labels.label_arrays import oracle_indices, stratified_split, target_matrix, training_targets
from training.labels.label_scorers import LabelConfig, context_of, logic_proxy_context, score_answer, support_score
from training.labels.labels import label_questions, make_row, oracle_route, preference, read_labels, with_cost_weight

DOCS = {
    "inception": ("Inception", "Inception is a 2010 film directed by Christopher Nolan."),
    "nolan": ("Christopher Nolan", "Christopher Nolan was born in London in 1970."),
    "paris": ("Paris", "Paris is the capital of France."),
    "nile": ("Nile", "The Nile is a river in Africa."),
}
DOC_CHUNKS = [Chunk(f"{doc}#0", doc, title, text, 0) for doc, (title, text) in DOCS.items()]  # one per document


def q(i, text, answers, supporting=(), dataset="toy"):
    return Question(
        id=f"q{i}", text=text, answers=list(answers), type=None, supporting=list(supporting), dataset=dataset
    )


QUESTIONS = [
    q(0, "Where was the director of Inception born?", ["London"], ["inception", "nolan"]),
    q(1, "What is the capital of France?", ["Paris"], ["paris"]),
    q(2, "Which river is in Africa?", ["Nile"], []),  # no supporting marked: answer-string fallback
    q(3, "Who painted the Mona Lisa?", ["Leonardo"], ["missing-doc"]),
]


# ---------------------------------------------------------------- preference vectors


def test_preference_ties_go_to_the_cheaper_route():
    costs = {"chunk": 540.0, "summary": 640.0, "logic": 1780.0}
    scores = {"chunk": 1.0, "summary": 1.0, "logic": 1.0}
    p = preference(scores, costs, lam=0.1, tau=0.1)
    assert abs(sum(p.values()) - 1) < 1e-9
    assert p["chunk"] > p["summary"] > p["logic"]
    assert oracle_route(p, costs) == "chunk"
    # lam = 0: an exact tie in the preference; the oracle still takes the cheaper route
    p0 = preference({"chunk": 0.5, "logic": 0.5}, {"chunk": 540, "logic": 1780}, lam=0.0, tau=0.1)
    assert p0["chunk"] == pytest.approx(p0["logic"])
    assert oracle_route(p0, {"chunk": 540, "logic": 1780}) == "chunk"
    assert oracle_route({"logic": 0.5, "chunk": 0.5}, {"logic": 1780, "chunk": 540}) == "chunk"
    # a real gain beats the cost term
    p1 = preference({"chunk": 0.5, "logic": 1.0}, {"chunk": 540, "logic": 1780}, lam=0.1, tau=0.1)
    assert oracle_route(p1, {"chunk": 540, "logic": 1780}) == "logic" and p1["logic"] > 0.9


def test_a_training_cost_weight_recomputes_preferences_from_measured_scores_and_tokens():
    cfg = LabelConfig(scorer="answer", routes=("chunk", "logic"))
    costs = {"chunk": {"tokens": 600}, "logic": {"tokens": 3000}}
    small_gain = make_row(QUESTIONS[0], {"chunk": 0.6, "logic": 0.7}, costs, cfg, index=0)
    assert small_gain["lam"] == 0.1 and small_gain["oracle"] == "logic"  # +0.1 F1 beats 0.1 * (1 - 0.2)
    same = with_cost_weight(small_gain, 0.1)
    assert same["pref"] == small_gain["pref"] and same["oracle"] == "logic"
    dearer = with_cost_weight(small_gain, 0.3)  # now 0.1 F1 is not worth 2,400 tokens
    assert dearer["oracle"] == "chunk" and dearer["pref"]["chunk"] > 0.5 and dearer["lam"] == 0.3
    assert small_gain["oracle"] == "logic" and small_gain["lam"] == 0.1  # the row read is not changed
    free = with_cost_weight(small_gain, 0.0)
    assert free["oracle"] == "logic" and free["pref"]["logic"] > small_gain["pref"]["logic"]
    # what training reads: the rows' own preferences unless a cost weight is given
    t, o = training_targets([small_gain], ("chunk", "logic"), "drop")
    assert o.tolist() == [1] and t[0, 1] == pytest.approx(small_gain["pref"]["logic"], rel=1e-5)
    t, o = training_targets([small_gain], ("chunk", "logic"), "drop", cost_weight=0.3)
    assert o.tolist() == [0] and t[0, 0] == pytest.approx(dearer["pref"]["chunk"], rel=1e-5)


def test_all_zero_rows_are_marked_and_target_the_cheapest():
    cfg = LabelConfig(scorer="retrieval", routes=("chunk", "logic"))
    costs = {"chunk": {"tokens_est": 540}, "logic": {"tokens_est": 1780}}
    zero = make_row(QUESTIONS[3], {"chunk": 0.0, "logic": 0.0}, costs, cfg, index=3)
    good = make_row(QUESTIONS[0], {"chunk": 0.5, "logic": 1.0}, costs, cfg, index=0)
    assert zero["all_zero"] is True and good["all_zero"] is False
    assert zero["oracle"] == "chunk" and good["oracle"] == "logic"
    routes = ("chunk", "logic")
    t = target_matrix([zero, good], routes, "cheapest")
    np.testing.assert_array_equal(t[0], [1.0, 0.0])
    np.testing.assert_allclose(t[1], [good["pref"]["chunk"], good["pref"]["logic"]], rtol=1e-5)
    np.testing.assert_allclose(target_matrix([zero], routes, "pref")[0], list(zero["pref"].values()), rtol=1e-5)
    assert oracle_indices([zero, good], routes).tolist() == [0, 1]
    with pytest.raises(LogicRouteError):
        target_matrix([zero], routes, "bogus")


def test_routes_the_cascade_skipped_carry_no_target_mass():
    """A perfect chunk answer stops the cascade; the skipped summary's imputed cost equals
    chunk's, so its stored preference ties with chunk's, but the target is chunk alone."""
    routes = ("chunk", "summary", "logic")
    row = {
        "pref": {"chunk": 0.39, "summary": 0.39, "logic": 0.22},
        "skipped": ["summary", "logic"],
        "all_zero": False,
        "costs": {"chunk": {"tokens": 700}, "summary": {"tokens_est": 700}, "logic": {"tokens_est": 1780}},
    }
    both_run = {**row, "skipped": ["logic"]}
    np.testing.assert_allclose(target_matrix([row], routes)[0], [1.0, 0.0, 0.0])
    np.testing.assert_allclose(target_matrix([both_run], routes)[0], [0.5, 0.5, 0.0])


def test_stratified_split_is_deterministic_and_covers_strata():
    keys = ["a|chunk"] * 20 + ["a|logic"] * 10 + ["b|chunk"] * 3
    keep, held = stratified_split(keys, 0.2, seed=0)
    keep2, held2 = stratified_split(keys, 0.2, seed=0)
    assert held.tolist() == held2.tolist() and sorted(keep.tolist() + held.tolist()) == list(range(33))
    held_keys = [keys[i] for i in held]
    assert held_keys.count("a|chunk") == 4 and held_keys.count("a|logic") == 2 and held_keys.count("b|chunk") == 1


# ---------------------------------------------------------------- scorers


def test_retrieval_contexts_and_support_score():
    kb = WordOverlapKB(DOC_CHUNKS)
    ctx = logic_proxy_context("Where was the director of Inception born?", kb, k=1)
    first, second = kb.searches[:2]
    assert first["exclude"] == [] and second["exclude"] == [ctx[0].chunk_id]  # sampling without replacement
    assert "Christopher Nolan" in second["query"]  # second hop carries the first hit's entities (the bridge)
    assert len({c.chunk_id for c in ctx}) == 2
    ids, text, n = context_of(ctx)
    assert sorted(ids) == ["inception", "nolan"] and n == 2
    assert support_score(QUESTIONS[0], ids, text) == 1.0
    assert support_score(QUESTIONS[0], ["inception"], "") == 0.5
    assert support_score(QUESTIONS[2], [], "The Nile is a river") == 1.0
    assert support_score(QUESTIONS[2], [], "nothing here") == 0.0
    assert context_of("plain text summary")[1] == "plain text summary"


def test_answer_scorer_books_cost_and_failures():
    def runner(route, question, kb, llm, k, style="short"):
        if route == "logic":
            raise LogicRouteError("decomposition failed")
        u = Usage(llm_calls=1, prompt_tokens=100, completion_tokens=3, seconds=0.5)
        return Answer(text="Paris", route=route, usage=u, trace={"confidence": 0.42})

    cfg = LabelConfig(scorer="answer", routes=("chunk", "logic"), metric="f1", llm="fake:scripted")
    scores, costs, extra = score_answer(QUESTIONS[1], None, object(), cfg, runner)
    assert scores == {"chunk": 1.0, "logic": 0.0}
    assert costs["chunk"]["tokens"] == 103 and costs["chunk"]["llm_calls"] == 1
    assert "decomposition failed" in extra["errors"]["logic"]
    assert extra["confidence"] == {"chunk": 0.42}  # how sure the model was of each answer it gave


def test_label_file_round_trip(tmp_path):
    out = tmp_path / "labels.jsonl"
    cfg = LabelConfig(scorer="retrieval", routes=("chunk", "logic"), k=1)
    res = label_questions(QUESTIONS, WordOverlapKB(DOC_CHUNKS), out, cfg, progress=False)
    assert res == {"written": 4, "skipped": 0, "all_zero": 1, "out": str(out)}
    rows = read_labels(out)
    assert [r["id"] for r in rows] == ["q0", "q1", "q2", "q3"]
    r0 = rows[0]
    assert set(r0) >= {"id", "dataset", "question", "type", "scores", "costs", "pref", "all_zero", "scorer", "llm"}
    assert r0["scores"] == {"chunk": 0.5, "logic": 1.0} and r0["oracle"] == "logic"
    assert rows[1]["oracle"] == "chunk" and rows[3]["all_zero"] is True
    assert rows[0]["scorer"] == "retrieval" and rows[0]["llm"] is None
    assert json.loads(out.read_text().splitlines()[0]) == r0


def test_resume_after_interruption_has_no_duplicates(tmp_path):
    out = tmp_path / "labels.jsonl"
    cfg = LabelConfig(scorer="retrieval", routes=("chunk", "logic"), k=1)

    class Interrupting(WordOverlapKB):
        def search(self, query, k=3, exclude=()):
            if len(self.searches) >= 6:  # 2 questions x 3 searches, then Ctrl-C
                raise KeyboardInterrupt
            return super().search(query, k, exclude)

    with pytest.raises(KeyboardInterrupt):
        label_questions(QUESTIONS, Interrupting(DOC_CHUNKS), out, cfg, progress=False)
    assert len(read_labels(out)) == 2
    with open(out, "a") as f:  # a torn row, as if killed mid-write
        f.write('{"id": "q2", "dataset": "to')
    assert len(read_labels(out)) == 2
    res = label_questions(QUESTIONS, WordOverlapKB(DOC_CHUNKS), out, cfg, progress=False)
    assert res["written"] == 2 and res["skipped"] == 2
    ids = [r["id"] for r in read_labels(out)]
    assert ids == ["q0", "q1", "q2", "q3"]
    assert label_questions(QUESTIONS, WordOverlapKB(DOC_CHUNKS), out, cfg, progress=False)["written"] == 0
    # a different kind of label cannot be appended to this file
    with pytest.raises(LogicRouteError, match="another --out"):
        label_questions(
            QUESTIONS,
            WordOverlapKB(DOC_CHUNKS),
            out,
            LabelConfig(scorer="retrieval", routes=("chunk", "summary")),
            progress=False,
        )


def test_malformed_middle_row_is_an_error(tmp_path):
    from engine.floor.base.errors import DataFormatError

    p = tmp_path / "bad.jsonl"
    p.write_text('{"id": 1}\nnot json\n{"id": 2}\n')
    with pytest.raises(DataFormatError, match=":2:"):
        read_labels(p)


def test_kb_built_from_other_data_is_refused(tmp_path):
    kb = WordOverlapKB([Chunk("x#0", "x", "X", "unrelated", 0)])
    with pytest.raises(LogicRouteError, match="supporting passages"):
        label_questions(
            QUESTIONS,
            kb,
            tmp_path / "l.jsonl",
            LabelConfig(scorer="retrieval", routes=("chunk", "logic")),
            progress=False,
        )


def test_summary_context_credit_for_quoted_sentences():
    kb = WordOverlapKB(DOC_CHUNKS)
    summary = RetrievedChunk(
        "n1",
        "",
        "Summary (level 1)",
        "Christopher Nolan was born in London in 1970. Paris is the capital of France.",
        0.9,
    )
    chunk = RetrievedChunk("inception#0", "inception", *DOCS["inception"], 0.8)
    ids, text, n = context_of(([summary, chunk], {"chunk_ids": ["inception#0"]}))
    assert ids == ["inception"] and n == 2
    assert support_score(QUESTIONS[0], ids, text) == 0.5  # without the KB: chunks only
    assert support_score(QUESTIONS[0], ids, text, kb) == 1.0  # the summary quotes the Nolan passage


def test_string_accuracy_has_one_name_and_acc_is_accepted():
    from training.common.answer_scores import METRICS, metric_name

    assert METRICS == ("em", "f1", "string_acc", "rouge_l", "coverage")
    assert LabelConfig(metric="acc").metric == "string_acc" == metric_name("string_acc")
    with pytest.raises(LogicRouteError, match="string_acc"):
        LabelConfig(metric="bleu")

    def runner(route, question, kb, llm, k, style="short"):
        return Answer(text="It is Paris, France", route=route, usage=Usage(llm_calls=1), trace={})

    cfg = LabelConfig(scorer="answer", routes=("chunk", "logic"), metric="acc", llm="fake:scripted")
    scores, _, _ = score_answer(QUESTIONS[1], None, object(), cfg, runner)
    assert scores == {"chunk": 1.0, "logic": 1.0}  # gold contained in the answer
    row = make_row(QUESTIONS[1], scores, {"chunk": {"tokens": 5}, "logic": {"tokens": 9}}, cfg)
    assert row["metric"] == "string_acc"


def test_decision_metrics_confusion_rows_are_decisions_and_columns_oracle_routes():
    from training.fitting.eval_router import format_report
    from training.fitting.route_metrics import routing_metrics

    costs = {"chunk": {"tokens_est": 540}, "logic": {"tokens_est": 1780}}
    rows = [
        {
            "oracle": o,
            "pref": {"chunk": 0.5, "logic": 0.5},
            "scores": {"chunk": 1.0, "logic": 1.0},
            "costs": costs,
            "dataset": "toy",
        }
        for o in ("chunk", "chunk", "logic")
    ]
    m = routing_metrics(["logic", "chunk", "logic"], rows, ["chunk", "logic"])
    cm = m["confusion"]
    # routed to chunk: one question whose oracle is chunk; routed to logic: one chunk, one logic
    assert cm["labels"] == ["chunk", "logic"] and cm["matrix"] == [[1, 0], [1, 1]]
    assert cm["agreement"] == pytest.approx(m["accuracy"], abs=1e-4)
    text = format_report({"checkpoint": "c", "routes": ["chunk", "logic"], "splits": {"overall": {"router": m}}})
    assert "confusion (rows decision, cols oracle) ['chunk', 'logic']: [[1, 0], [1, 1]]" in text


def test_label_refuses_complete_beside_a_cascade_before_reading_anything(tmp_path):
    from click.testing import CliRunner

    from training.labels.cmd_label import label

    args = ["no-such-data", "--kb", str(tmp_path / "kb"), "--out", str(tmp_path / "l.jsonl"), "--complete"]
    res = CliRunner().invoke(label, [*args, "--stop-score", "1.0"], usage_error_expected=True)
    assert res.exit_code == 2 and "give one or the other" in res.output
    assert not (tmp_path / "l.jsonl").exists() and not (tmp_path / "kb").exists()


def test_the_shipped_routers_label_files_are_found_and_its_two_cards_agree():
    from router.checkpoint import DEFAULT_CHECKPOINT, card_path, read_card
    from training.labels.labels import REPO, card_label_paths

    header = read_card(DEFAULT_CHECKPOINT)
    assert json.loads(card_path(DEFAULT_CHECKPOINT).read_text()) == header
    found = card_label_paths(header)
    assert len(found) == len(header["training"]["label_files"]) == 7
    assert all(p.resolve().is_relative_to(REPO / "training/data/labels") for p in found)


def test_a_card_naming_the_label_folder_before_it_moved_still_finds_its_files():
    """Checkpoints trained before the labels moved name checkpoints/labels/...; their header card is
    never rewritten."""
    from training.labels.labels import REPO, card_label_paths

    card = {"training": {"label_files": [{"path": "checkpoints/labels/answer_medical.jsonl"}]}}
    assert [p.resolve() for p in card_label_paths(card)] == [(REPO / "training/data/labels/answer_medical.jsonl")]
    assert not (REPO / "checkpoints/labels").exists()


def test_a_card_label_file_missing_everywhere_is_left_out(tmp_path):
    from training.labels.labels import card_label_paths

    there = tmp_path / "rows.jsonl"
    there.write_text("")
    card = {"training": {"label_files": [{"path": str(there)}, {"path": "checkpoints/labels/none.jsonl"}]}}
    assert card_label_paths(card) == [there]
    assert card_label_paths(None) == [] and card_label_paths({"training": {}}) == []
