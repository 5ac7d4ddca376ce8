"""A writer killed (SIGKILL) while it embeds new documents loses nothing: the KB still opens at its
last committed state, and the same index run afterwards adds every document once."""

from __future__ import annotations

import os
import signal

import pytest

from hierarchy.kb import KnowledgeBase
from hierarchy.kb_check import check_kb
from hierarchy.layers.update import build_layers
from tests.hierarchy.test_kb_concurrency import BATCH, CTX, START, _assert_whole, _emb, _index, _source
from tests.samples import make_docs

pytestmark = pytest.mark.skipif(os.name != "posix", reason="SIGKILL and the writer lock are POSIX")


@pytest.fixture
def kb_with_layers(tmp_path) -> str:
    kb = KnowledgeBase.create(tmp_path / "kb", _emb(), chunk_words=200, overlap_words=0)
    kb.add(make_docs(2), show_progress=False)
    build_layers(kb, show_progress=False, cluster_size=4)
    return str(kb.path)


def _killed_while_embedding(kb_dir: str, source: str) -> None:
    from tests.fakes import HashedBowEmbedder

    def die(self, texts, *a, **k):
        os.kill(os.getpid(), signal.SIGKILL)

    HashedBowEmbedder.encode = die  # the documents are read and chunked, then the process dies
    _index(kb_dir, source)


def test_a_writer_killed_while_embedding_leaves_the_last_commit_and_the_rerun_adds_everything(kb_with_layers, tmp_path):
    kb_dir = kb_with_layers
    source = _source(tmp_path, "killed")
    p = CTX.Process(target=_killed_while_embedding, args=(kb_dir, source))
    p.start()
    p.join(120)
    assert p.exitcode == -signal.SIGKILL
    report = check_kb(kb_dir)
    assert report.ok and report.chunks == START, report.problems
    _index(kb_dir, source)
    _assert_whole(kb_dir, START + BATCH)
