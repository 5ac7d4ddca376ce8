"""Token F1 and answer normalization, checked against hand-computed values."""

import pytest

from engine.floor.base.metrics import f1, normalize_answer


def test_normalization_lowercases_and_drops_punctuation_articles_and_extra_spaces():
    assert normalize_answer("  The  Eiffel-Tower, in Paris! ") == "eiffeltower in paris"
    assert normalize_answer("A cat and an owl") == "cat and owl"
    # articles only as whole words: "theatre" and "banana" keep their letters
    assert normalize_answer("Theatre banana") == "theatre banana"


def test_f1_is_token_overlap():
    # pred tokens: barack obama jr ; gold: barack obama -> P=2/3, R=1, F1=0.8
    assert f1("Barack Obama Jr.", ["Barack Obama"]) == pytest.approx(0.8)
    # pred: new york ; gold: new york city -> P=1, R=2/3, F1=0.8
    assert f1("New York", ["New York City"]) == pytest.approx(0.8)
    # repeated tokens count at most as often as in the gold: "paris paris" vs "paris" -> P=1/2, R=1
    assert f1("Paris Paris", ["Paris"]) == pytest.approx(2 / 3)
    assert f1("London", ["Paris"]) == 0.0


def test_f1_yes_no_rule_gives_zero_unless_identical():
    assert f1("yes", ["no"]) == 0.0
    assert f1("no", ["no"]) == 1.0
    # a long prediction containing the gold "yes" scores 0, not 1/4
    assert f1("yes it is", ["yes"]) == 0.0
    # a special prediction against a normal gold also scores 0
    assert f1("no", ["no way"]) == 0.0
    assert f1("noanswer", ["the answer"]) == 0.0


def test_a_bare_string_gold_is_one_answer_not_characters():
    assert f1("Paris", "Paris") == 1.0
    assert f1("P", "Paris") == 0.0
