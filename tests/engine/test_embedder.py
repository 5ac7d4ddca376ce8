"""Embedder: identity without loading, encode contract, the SQLite cache, sharing, threads.
Tests that load the real MiniLM are marked `embedder` and share one instance."""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pytest

from engine.floor.base.errors import ModelFilesError
from engine.floor.embedder import DEFAULT_MODEL_ID, Embedder, default_model_path, get_embedder

# -- no model load ---------------------------------------------------------------------------


def test_default_id_and_dim_without_loading():
    e = Embedder(cache=False)
    assert e.id == DEFAULT_MODEL_ID == "all-MiniLM-L6-v2"
    assert e.dim == 384
    assert not e.loaded  # read from the model's config files
    assert e.spec is None
    # the bundled folder given explicitly is the same model
    assert Embedder(str(default_model_path()), cache=False).id == DEFAULT_MODEL_ID


def test_custom_model_folder_id_is_name_plus_config_hash(tmp_path):
    a = tmp_path / "my-model"
    a.mkdir()
    (a / "config.json").write_text('{"hidden_size": 8}')
    b = tmp_path / "other" / "my-model"
    b.mkdir(parents=True)
    (b / "config.json").write_text('{"hidden_size": 16}')
    ia, ib = Embedder(a, cache=False).id, Embedder(b, cache=False).id
    assert ia.startswith("my-model-") and ib.startswith("my-model-") and ia != ib
    assert ia == "my-model-320853ed"  # persisted in KB manifests and cache rows: must never change
    assert Embedder(a, cache=False).spec == str(a.resolve())


def test_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ModelFilesError, match="not found"):
        Embedder(tmp_path / "nope")


def test_get_embedder_is_shared_per_model():
    assert get_embedder() is get_embedder(None) is get_embedder("all-MiniLM-L6-v2")
    assert get_embedder(str(default_model_path())) is get_embedder()


def test_cache_dir_from_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LOGICROUTE_CACHE_DIR", str(tmp_path / "c"))
    e = Embedder(cache=True)
    cache = e._get_cache()
    assert cache is not None and cache.path == tmp_path / "c" / "embeddings.sqlite"
    assert Embedder(cache=False)._get_cache() is None


def test_unusable_cache_warns_and_runs_uncached(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")  # a file where the cache folder should be
    e = Embedder(cache=blocker / "sub")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert e._get_cache() is None
    assert any("embedding cache disabled" in str(x.message) for x in w)


def test_empty_input_needs_no_model():
    e = Embedder(cache=False)
    out = e.encode([])
    assert out.shape == (0, 384) and out.dtype == np.float32 and not e.loaded


def test_cache_key_is_the_sha1_digest_of_the_text(tmp_path):
    """Existing caches hold rows under this key: a changed key would re-embed everything."""
    e = Embedder(cache=tmp_path)
    vec = np.arange(384, dtype=np.float32) / 384
    key = bytes.fromhex("aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d")  # sha1(b"hello")
    e._get_cache().put_many(e.id, [(key, vec.tobytes())])
    e._encode_model = lambda texts: pytest.fail(f"re-encoded {texts}")
    assert np.array_equal(e.encode(["hello"])[0], vec) and not e.loaded


# -- real model ------------------------------------------------------------------------------


@pytest.mark.embedder
def test_embedder_encode_contract(real_embedder):
    texts = ["Paris is the capital of France.", "A short one.", "x " * 300]
    v = real_embedder.encode(texts)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # same vectors as the bare model (our length sorting must not change results)
    bare = real_embedder.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert np.allclose(v, bare, atol=1e-5)
    assert real_embedder.encode("A short one.").shape == (1, 384)


@pytest.mark.embedder
def test_embedder_cache_hit_avoids_reencoding(real_embedder, tmp_path):
    e = Embedder(cache=tmp_path)  # shares the loaded weights, not the cache
    calls: list[list[str]] = []
    orig = e._encode_model
    e._encode_model = lambda texts: (calls.append(list(texts)), orig(texts))[1]
    texts = ["alpha beta", "gamma delta", "alpha beta"]
    v1 = e.encode(texts)
    assert sorted(sum(calls, [])) == ["alpha beta", "gamma delta"]  # duplicate encoded once
    assert np.array_equal(v1[0], v1[2])
    calls.clear()
    v2 = e.encode(texts + ["new text"])
    assert calls == [["new text"]]  # only the miss
    assert np.array_equal(v2[:3], v1)
    # persists across instances (the SQLite file)
    e2 = Embedder(cache=tmp_path)
    e2._encode_model = lambda texts: pytest.fail(f"re-encoded {texts}")
    assert np.array_equal(e2.encode(texts), v1)
    assert e2.cache.count(e2.id) == 3


@pytest.mark.embedder
def test_embedder_thread_safe(real_embedder):
    texts = [f"sentence number {i} about topic {i % 3}" for i in range(12)]
    e = Embedder(cache=False)
    want = e.encode(texts)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work():
        try:
            results.append(e.encode(texts))
        except BaseException as x:
            errors.append(x)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert all(np.allclose(r, want, atol=1e-5) for r in results)


@pytest.mark.embedder
def test_embedder_progress_bar_goes_to_stderr(real_embedder, capsys):
    real_embedder.encode(["progress one", "progress two"], show_progress=True)
    out, err = capsys.readouterr()
    assert out == "" and "embedding" in err


@pytest.mark.embedder
def test_warm_up_runs_the_model_even_when_the_cache_holds_its_text(real_embedder, tmp_path):
    """What `serve` runs before it listens: through the cache, a second start would load nothing
    and its first question would wait for the model."""
    e = Embedder(cache=tmp_path)
    e.encode(["warm-up"])
    ran = e.encoded_texts
    e.warm_up()
    assert e.encoded_texts == ran + 1 and e.loaded
