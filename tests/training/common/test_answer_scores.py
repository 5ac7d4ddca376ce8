"""Exact match, string accuracy and the sentence-answer metrics (ROUGE-L, coverage) on
hand-computed examples, and the metric names the benchmark and the label scorer accept."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from engine.floor.base.errors import LogicRouteError
from engine.floor.base.metrics import f1
from training.bench.bench_data import BenchConfig, collect_items, load_data
from training.common.answer_scores import (
    METRICS,
    answer_scores,
    answer_text,
    coverage,
    exact_match,
    metric_fn,
    metric_name,
    rouge_l,
    string_acc,
)

GOLD = "Basal cell carcinoma (BCC) is the most common type of skin cancer."

# ---------------------------------------------------------------- exact match, string accuracy


def test_exact_match_ignores_case_articles_and_punctuation():
    assert exact_match("the Beatles.", ["Beatles"]) == 1.0
    assert exact_match("Beatles band", ["Beatles"]) == 0.0


def test_every_metric_takes_the_best_gold_alias():
    golds = ["United States of America", "USA"]
    assert exact_match("U.S.A.", golds) == 1.0
    assert f1("USA", golds) == 1.0
    assert string_acc("it is the USA", golds) == 1.0


def test_a_bare_string_gold_is_one_answer_not_characters():
    assert exact_match("Paris", "Paris") == 1.0
    assert string_acc("a", "Paris") == 0.0


def test_string_acc_is_gold_contained_in_prediction():
    assert string_acc("He was born on October 5, 1987 in Seattle.", ["October 5, 1987"]) == 1.0
    assert string_acc("October 1987", ["October 5, 1987"]) == 0.0
    # plain substring, as in LogicRAG: the gold "no" is inside "not"
    assert string_acc("not sure", ["no"]) == 1.0
    # a gold that normalizes to nothing matches nothing
    assert string_acc("anything", ["The"]) == 0.0


# ---------------------------------------------------------------- ROUGE-L


def test_rouge_l_is_the_f_measure_of_the_longest_common_subsequence():
    # LCS "the cat on the mat" = 5 of 6 tokens on both sides: P = R = F = 5/6
    assert rouge_l("the cat sat on the mat", "the cat is on the mat") == pytest.approx(5 / 6)
    # LCS "b d" = 2: P = 2/4, R = 2/3, F = 2PR/(P+R) = 4/7
    assert rouge_l("a b c d", "b d e") == pytest.approx(4 / 7)
    # order matters (unlike token F1): "b a" vs "a b" share a subsequence of 1
    assert rouge_l("b a", "a b") == pytest.approx(0.5)


def test_rouge_l_lowercases_drops_punctuation_and_stems():
    assert rouge_l("BASAL CELL CARCINOMA (BCC) is the most common type of skin cancer", GOLD) == 1.0
    # Porter stemming: "cancers" -> "cancer"; LCS 2 of 2 predicted and 2 of 3 gold tokens -> F = 0.8
    assert rouge_l("skin cancers", "common skin cancer") == pytest.approx(0.8)


def test_rouge_l_takes_the_best_gold_and_zero_without_tokens():
    assert rouge_l("a b", ["x y", "a b"]) == 1.0
    assert rouge_l("", GOLD) == 0.0 and rouge_l("a", "") == 0.0 and rouge_l("a", []) == 0.0
    assert isinstance(rouge_l("", GOLD), float)


# ---------------------------------------------------------------- coverage


def test_coverage_is_the_share_of_gold_tokens_in_the_prediction():
    # gold normalizes to 11 tokens (articles and punctuation dropped):
    # basal cell carcinoma bcc is most common type of skin cancer; the prediction holds 6 of them
    assert coverage("BCC is the most common skin cancer.", GOLD) == pytest.approx(6 / 11)
    # extra words in a long answer cost nothing (F1 would drop)
    assert coverage(f"In short: {GOLD} It is seldom fatal and grows slowly.", GOLD) == 1.0


def test_coverage_counts_each_gold_occurrence_once():
    assert coverage("cell wall", "cell cell wall") == pytest.approx(2 / 3)
    assert coverage("cell cell cell", "cell wall") == pytest.approx(1 / 2)


def test_coverage_takes_the_best_gold_and_zero_for_empty_golds():
    assert coverage("paris", ["london", "Paris, France"]) == pytest.approx(1 / 2)
    assert coverage("anything", "The") == 0.0 and coverage("anything", []) == 0.0


# ---------------------------------------------------------------- names


def test_the_sentence_metrics_are_named_everywhere():
    assert METRICS == ("em", "f1", "string_acc", "rouge_l", "coverage")
    assert metric_name("rouge_l") == "rouge_l" and metric_name("coverage") == "coverage"
    assert metric_fn("rouge_l") is rouge_l and metric_fn("coverage") is coverage
    scores = answer_scores("BCC is the most common skin cancer.", [GOLD])
    assert list(scores) == list(METRICS)
    assert scores["coverage"] == pytest.approx(6 / 11)
    with pytest.raises(LogicRouteError, match="rouge_l"):
        metric_name("rouge")


def test_benchmark_config_and_commands_accept_the_sentence_metrics(tmp_path):
    from training.bench.cmd_benchmark import benchmark
    from training.labels.cmd_label import label

    assert BenchConfig(data=[], out=str(tmp_path), metric="rouge_l").metric == "rouge_l"
    for cmd in (benchmark, label):
        out = CliRunner().invoke(cmd, ["--help"]).output
        assert "rouge_l" in out and "coverage" in out and "--corpus" in out


# ---------------------------------------------------------------- a corpus set in the benchmark


def write_set(folder, corpus_name="Medical"):
    folder.mkdir(parents=True, exist_ok=True)
    text = " ".join(f"Fact {i} is about the skin." for i in range(50))
    (folder / "corpus.json").write_text(json.dumps([{"corpus_name": corpus_name, "context": text}]))
    rows = [
        {"id": f"M-{i}", "source": "Medical", "question": f"Fact {i}?", "answer": f"Fact {i}.", "question_type": "T"}
        for i in range(4)
    ]
    (folder / "medical_questions.json").write_text(json.dumps(rows))
    return str(folder / "medical_questions.json"), str(folder / "corpus.json")


def test_benchmark_reads_a_corpus_set_with_its_whole_corpus_as_the_kb(tmp_path):
    questions, corpus = write_set(tmp_path / "set")
    cfg = BenchConfig(data=[questions], out=str(tmp_path / "out"), n=2, kb_questions=4, corpus=corpus)
    data = load_data(cfg)
    items, kb_passages = collect_items(cfg, data, [])
    assert sorted(items) == ["graphrag_medical:M-0", "graphrag_medical:M-1"]
    assert len(kb_passages["all"]) == len(data[0][1].passages) == 2  # 300 words in 150-word passages
    with pytest.raises(LogicRouteError, match="no data file reads one"):
        load_data(BenchConfig(data=[], out=str(tmp_path / "out"), corpus=corpus))


def test_citation_markers_of_reader_answers_are_not_answer_words():
    gold = "Basal cell carcinoma is the most common skin cancer."
    cited = "Basal cell carcinoma [1] is the most common skin cancer [2, 3]."
    assert rouge_l(cited, gold) == pytest.approx(1.0)
    assert coverage(cited, gold) == pytest.approx(1.0)


def test_a_reference_list_after_the_answer_is_not_answer_words():
    # LightRAG's prompt asks for a "### References" list after every reply
    reply = "October 5, 1987\n\n### References\n\n- [1] Get Low (song)\n- [2] Dillon Francis"
    assert answer_scores(reply, ["October 5, 1987"]) == answer_scores("October 5, 1987", ["October 5, 1987"])
    assert answer_scores(reply, ["October 5, 1987"])["em"] == 1.0
    assert answer_text("Paris\n**Sources:**\n[1] France") == "Paris"
    assert answer_text("Paris\nReferences\n- [1] France") == "Paris"


def test_only_a_line_that_heads_a_list_after_the_answer_is_cut():
    assert answer_text("Sources") == "Sources"  # a one-word answer, not a heading
    assert answer_text("The References of Scripture") == "The References of Scripture"
    assert answer_text("Rome\nsources say so") == "Rome\nsources say so"  # a sentence, not a heading
