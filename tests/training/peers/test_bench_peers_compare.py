"""The report's comparison of logicroute's logic route and router with each peer: a paired F1
difference with its bootstrap interval, wins and losses per question, and cost as ratios."""

from __future__ import annotations

from types import SimpleNamespace

from training.peers.bench_peers_compare import (
    by_type_lines,
    compare,
    comparison_lines,
    comparisons,
    f1_by_type,
    paired_interval,
)
from training.peers.bench_peers_run import SystemRun

LOGIC = {"route": "logic"}
PEER = {"package": "peer==1.0"}


def answers(f1s: list[float], tokens: int = 1000, seconds: float = 10.0) -> list[dict]:
    return [
        {"key": f"q{i}", "f1": f, "prompt_tokens": tokens - 100, "completion_tokens": 100, "seconds": seconds}
        for i, f in enumerate(f1s)
    ]


def system(name, settings, f1s, tokens=1000, seconds=10.0, index_tokens=0):
    index = [{"prompt_tokens": index_tokens, "completion_tokens": 0}] if index_tokens else []
    return SystemRun(name, settings, "sig", index, answers(f1s, tokens, seconds))


def test_a_reference_right_where_the_peer_is_wrong_is_higher_with_an_interval_above_zero():
    logic = system("logic", LOGIC, [1.0] * 20)
    peer = system("peer", PEER, [0.0] * 10 + [1.0] * 10, tokens=4000, index_tokens=50_000)
    c = compare(logic, peer)
    assert c["f1_difference"] == 50.0 and c["f1_interval"][0] > 0
    assert (c["reference_wins"], c["peer_wins"], c["ties"]) == (10, 0, 10)
    assert c["tokens_ratio"] == 0.25 and c["peer_index_tokens"] == 50_000 and c["reference_index_tokens"] == 0
    assert "higher" in comparison_lines([c])[-1]


def test_a_difference_of_one_question_either_way_is_no_different():
    logic = system("logic", LOGIC, [1.0, 0.0] + [1.0] * 18)
    peer = system("peer", PEER, [0.0, 1.0] + [1.0] * 18)
    c = compare(logic, peer)
    assert c["f1_difference"] == 0.0 and c["f1_interval"][0] < 0 < c["f1_interval"][1]
    assert "no different (the interval holds 0)" in comparison_lines([c])[-1]


def test_only_questions_both_answered_are_paired():
    logic = system("logic", LOGIC, [1.0, 1.0, 1.0])
    peer = system("peer", PEER, [0.0])
    assert compare(logic, peer)["questions"] == 1
    assert compare(logic, system("empty", PEER, [])) is None


def test_each_of_logicroutes_references_is_held_against_each_peer_and_nothing_else():
    runs = [
        system("chunk", {"route": "chunk"}, [0.0, 1.0]),
        system("logic", LOGIC, [1.0, 1.0]),
        system("router", {"route": "auto (router)"}, [1.0, 0.0]),
        system("lightrag", PEER, [0.0, 0.0]),
        system("hipporag", PEER, [1.0, 1.0]),
        SystemRun("broken", PEER, "", [], [], error="start: no venv"),
    ]
    pairs = [(c["reference"], c["peer"]) for c in comparisons(runs)]
    assert pairs == [("logic", "lightrag"), ("logic", "hipporag"), ("router", "lightrag"), ("router", "hipporag")]


def test_without_a_reference_there_is_no_comparison_section():
    assert comparisons([system("lightrag", PEER, [1.0])]) == []
    assert comparison_lines([]) == []


def test_the_bootstrap_interval_is_the_same_on_every_run_and_brackets_the_mean():
    diffs = [100.0, 0.0, -50.0, 100.0, 0.0, 25.0, 0.0, 100.0]
    low, high = paired_interval(diffs)
    assert (low, high) == paired_interval(diffs)
    assert low <= sum(diffs) / len(diffs) <= high


def test_f1_by_question_type_shows_where_a_peer_wins_with_unanswered_questions_counting_zero():
    items = [SimpleNamespace(key=f"q{i}", type="comparison" if i < 2 else "compositional") for i in range(4)]
    logic = system("logic", LOGIC, [1.0, 1.0, 0.0, 0.0])
    peer = system("peer", PEER, [0.0, 0.0, 1.0])  # q3 unanswered
    groups = f1_by_type(items, [logic, peer])
    assert groups == [
        {"type": "comparison", "questions": 2, "f1": {"logic": 100.0, "peer": 0.0}},
        {"type": "compositional", "questions": 2, "f1": {"logic": 0.0, "peer": 50.0}},
    ]
    assert "| compositional | 2 | 0.0 | 50.0 |" in by_type_lines(groups)


def test_a_set_of_one_question_type_has_no_by_type_section():
    items = [SimpleNamespace(key="q0", type=None)]
    assert by_type_lines(f1_by_type(items, [system("logic", LOGIC, [1.0])])) == []
