"""`logicroute bench peers`' command: the model every system shares gets the context the peers'
query prompts need, without changing what the LLM call cache and the rows are keyed by; the rows are
signed by the store they built."""

from __future__ import annotations


def test_the_in_process_model_gets_the_asked_context_and_keeps_its_name(tmp_path):
    from engine.floor.llm.factory import make_llm
    from training.peers.cmd_bench_peers import with_context

    llm = with_context(make_llm("local:qwen2.5-coder-1.5b", cache=tmp_path / "cache.sqlite"), 8192)
    assert llm.inner.n_ctx == 8192  # set before the first call: nothing is loaded yet
    assert llm.name == "local:qwen2.5-coder-1.5b"  # the cache's keys and the rows' signature


def test_a_served_model_is_left_as_its_server_made_it(tmp_path):
    from engine.floor.llm.factory import make_llm
    from training.peers.cmd_bench_peers import with_context

    served = make_llm("openai:qwen@http://127.0.0.1:8741/v1", cache=False)
    assert with_context(served, 8192) is served and not hasattr(served, "n_ctx")


def test_a_store_deleted_and_made_again_signs_its_rows_anew_while_an_older_store_keeps_its_name(tmp_path):
    import shutil

    from training.peers.bench_peers_subprocess import store_identity

    store = tmp_path / "store-abc"
    store.mkdir()
    first = store_identity(store)
    assert first.startswith("store-abc#") and store_identity(store) == first  # the same store, the same rows
    shutil.rmtree(store)
    store.mkdir()
    assert store_identity(store) != first  # the old rows count passages this store lacks
    older = tmp_path / "store-old"
    older.mkdir()
    (older / "kv_store_full_docs.json").write_text("{}")  # built before stores had an id
    assert store_identity(older) == "store-old"
