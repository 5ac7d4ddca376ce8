"""The router's features of a Question read once (engine.floor.question.parse) equal those of its text: the
pipeline hands the router the Question it built, and the features reuse its question word and
answer shape instead of reading the text again."""

from __future__ import annotations

import numpy as np

from engine.floor.question.parse import read_question
from router.features import ALL_FEATURES, cheap_features
from tests.router import routing_questions as rq
from tests.router.test_structure import EXPLANATIONS, LISTS, VALUES

QUESTIONS = [*LISTS, *EXPLANATIONS, *VALUES, *rq.ONE_HOP, *rq.MULTI_HOP, "  who   wrote it ?  "]


def test_a_questions_features_equal_its_texts():
    got = cheap_features([read_question(q) for q in QUESTIONS], ALL_FEATURES)
    assert np.array_equal(got, cheap_features(QUESTIONS, ALL_FEATURES))


def test_the_features_keep_the_shape_they_read_on_the_question(monkeypatch):
    import engine.floor.question.structure as structure_mod

    shapes: list[str] = []
    reader = structure_mod.answer_shape
    monkeypatch.setattr(structure_mod, "answer_shape", lambda t: shapes.append(t) or reader(t))
    read = read_question(LISTS[0])
    cheap_features([read], ("shape",))
    assert read.shape == "list" and shapes == [LISTS[0]]  # read once, by the features; the gate reuses it
