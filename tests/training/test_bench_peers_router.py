"""`logicroute bench peers`' router rows: `router-adapted` rows are signed with the KB's adapted
router, so a KB adapted again is answered again; the `router` rows keep the shipped generalist."""

from __future__ import annotations

from training.bench_peers import PeerContext


def test_adapting_the_kb_again_gives_router_adapted_rows_a_new_signature_and_leaves_the_router_rows(tmp_path):
    from router.kb_router import ADAPTED, remember
    from tests.training.adapt_setup import embedder, tiny_kb
    from training.bench_peers_subprocess import builtin_registry

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
