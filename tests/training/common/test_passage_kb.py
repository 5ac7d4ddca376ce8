"""training.common.passage_kb and the commands that build a KB from a data set's passages: a KB that an
interrupted build left committed but short (even empty) is resumed, never trusted, and no label
is ever answered from an empty KB."""

from __future__ import annotations

import json
from types import SimpleNamespace

from click.testing import CliRunner

from hierarchy.documents import Document
from hierarchy.kb import KnowledgeBase
from tests.fakes import HashedBowEmbedder
from training.common.passage_kb import passages_kb


def _passages(n: int) -> list:
    return [
        SimpleNamespace(id=f"p{i}", title=f"Town {i}", text=f"Town {i} lies on river {i} and hosts fair {i}.")
        for i in range(n)
    ]


def test_a_kb_an_interrupted_build_left_short_is_completed_embedding_only_what_it_lacked(tmp_path):
    emb = HashedBowEmbedder(dim=32)
    passages = _passages(6)
    kb = KnowledgeBase.create(tmp_path / "kb", emb)  # committed, then the build died: empty
    kb.add([Document(id=p.id, title=p.title, text=p.text) for p in passages[:2]], show_progress=False)
    before = len(emb.encoded)

    kb = passages_kb(tmp_path / "kb", passages, emb, show_progress=False)
    assert sorted(kb.doc_ids) == [p.id for p in passages]
    assert len(emb.encoded) - before == 4  # the four missing passages, one chunk each

    again = passages_kb(tmp_path / "kb", passages, emb, show_progress=False)
    assert len(again) == 6 and len(emb.encoded) - before == 4  # complete: nothing embedded


def test_overwrite_starts_from_an_empty_kb(tmp_path):
    emb = HashedBowEmbedder(dim=32)
    passages_kb(tmp_path / "kb", _passages(3), emb, show_progress=False)
    kb = passages_kb(tmp_path / "kb", _passages(6)[4:], emb, overwrite=True, show_progress=False)
    assert sorted(kb.doc_ids) == ["p4", "p5"]


def _tiny_set(tmp_path) -> str:
    rows = [
        {
            "id": f"q{i}",
            "question": f"Which river does Town {i} lie on?",
            "answers": [f"river {i}"],
            "passages": [{"title": f"Town {i}", "text": f"Town {i} lies on river {i}.", "supporting": True}],
        }
        for i in range(4)
    ]
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return str(path)


def test_label_refuses_an_empty_kb_and_with_build_kb_completes_it_first(tmp_path):
    from engine.face.cli import main

    emb = HashedBowEmbedder(dim=32)
    KnowledgeBase.create(tmp_path / "kb", emb)  # what a label run killed mid-build left behind
    args = ["label", _tiny_set(tmp_path), "--kb", str(tmp_path / "kb"), "--out", str(tmp_path / "l.jsonl")]
    args += ["--scorer", "retrieval", "--routes", "chunk,logic", "--k", "1"]
    run = CliRunner()
    res = run.invoke(main, args, obj={"embedder": emb})
    assert (
        res.exit_code != 0
        and "holds no chunks" in res.output
        and "--build-kb" in res.output
        and not (tmp_path / "l.jsonl").exists()
    )

    res = run.invoke(main, [*args, "--build-kb"], obj={"embedder": emb})
    assert res.exit_code == 0, res.output
    assert "resuming" in res.output
    assert len(KnowledgeBase.open(tmp_path / "kb", emb)) == 4
    assert len((tmp_path / "l.jsonl").read_text().splitlines()) == 4
