"""Which questions a label run takes: a span with a stride, or the questions of one type (GraphRAG-Bench
lists its types in blocks), with their positions in the file and the answer style their golds need."""

from __future__ import annotations

import pytest

from engine.floor.base.errors import LogicRouteError
from tests.hierarchy.test_datasets import write_graphrag
from training.common.answer_scores import gold_style
from training.labels.labels import select_questions


def test_a_type_filter_counts_offset_and_stride_within_that_type(tmp_path):
    path = write_graphrag(tmp_path, n_questions=9)  # even positions: Contextual Summarize
    qs, ds, positions = select_questions(path, n=2, offset=1, stride=2, question_type="Contextual Summarize")
    assert positions == [2, 6]
    assert [q.id for q in qs] == ["Medical-2", "Medical-6"]
    assert all(q.type == "Contextual Summarize" for q in qs)
    assert gold_style(ds) == "reader"  # sentence answers over a shared corpus


def test_without_a_type_the_positions_follow_offset_and_stride(tmp_path):
    path = write_graphrag(tmp_path, n_questions=9)
    qs, _, positions = select_questions(path, n=3, offset=1, stride=3)
    assert positions == [1, 4, 7] and [q.id for q in qs] == ["Medical-1", "Medical-4", "Medical-7"]


def test_an_unknown_type_is_refused_naming_the_types(tmp_path):
    path = write_graphrag(tmp_path, n_questions=4)
    with pytest.raises(LogicRouteError, match="Fact Retrieval"):
        select_questions(path, question_type="Global Sensemaking")
