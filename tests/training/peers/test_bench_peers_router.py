"""`logicroute bench peers`' own rows: logicroute's KB holds every passage, whatever the index
batch; `router-adapted` rows are signed with the KB's adapted router, so a KB adapted again is
answered again; the `router` rows keep the shipped generalist."""

from __future__ import annotations

from training.peers.bench_peers import PeerContext


def test_adapting_the_kb_again_gives_router_adapted_rows_a_new_signature_and_leaves_the_router_rows(tmp_path):
    from router.kb_router import ADAPTED, remember
    from tests.training.adapt_setup import embedder, tiny_kb
    from training.peers.bench_peers_subprocess import builtin_registry

    emb = embedder()
    kb = tiny_kb(tmp_path / "kb", emb)
    ctx = PeerContext(None, tmp_path / "router-adapted", emb)
    adapted, shipped = builtin_registry()["router-adapted"](ctx), builtin_registry()["router"](ctx)
    signed = []
    for weights in (b"first adaptation", b"second adaptation"):
        (kb.path / ADAPTED).parent.mkdir(exist_ok=True)
        (kb.path / ADAPTED).write_bytes(weights)
        remember(kb, kb.path / ADAPTED, {"from": "the shipped generalist"})
        signed.append((adapted.settings(), shipped.settings()))
    (first, router_first), (second, router_second) = signed
    assert first != second  # the answers of the first router are not taken for the second's
    assert router_first == router_second


def test_logicroutes_kb_holds_every_passage_even_when_the_peers_index_in_small_batches(tmp_path, monkeypatch):
    from hierarchy.documents import Chunk
    from tests.fakes import ScriptedLLM, WordOverlapKB
    from tests.training.peers.test_bench_peers import FACTS, write_set
    from training.peers.bench_peers_run import PeersConfig, run_peers
    from training.peers.bench_peers_subprocess import builtin_registry

    built = []

    def kb_of(path, passages, show_progress=True):
        built.append([p.id for p in passages])
        return WordOverlapKB(Chunk(p.id, p.id, p.title, p.text, 0) for p in passages)

    monkeypatch.setattr("training.bench.bench_data.build_or_open_kb", kb_of)
    llm = ScriptedLLM(rules={q: gold for q, gold, *_ in FACTS})
    cfg = PeersConfig(data=write_set(tmp_path), systems=("chunk",), out=str(tmp_path / "out"), n=4, index_batch=3)
    cfg.show_progress = False
    report = run_peers(cfg, {"chunk": builtin_registry()["chunk"]}, llm, echo=lambda s: None)
    assert len(built) == 1 and len(built[0]) == 8  # one KB of all 8 passages, not one per batch of 3
    assert report["systems"][0]["index_passages"] == 8
