"""The data files of a knowledge base read back: chunk lines, vector arrays, a faiss index, and
the checks that they agree with each other and with the manifest. hierarchy.kb_segments lays
them out; see hierarchy.kb for the layout, hierarchy.store for how they are committed."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np

from engine.floor.base.errors import KBCorruptError
from hierarchy.documents import Chunk
from hierarchy.vector_store.base import FAISS_INDEX

CHUNKS = "chunks.jsonl"  # format 1's one chunk file (hierarchy.kb_segments)
VECTORS = "vectors.npy"  # format 1's one vector file
INDEX = FAISS_INDEX  # the index a faiss store persists: an HNSW graph, too slow to rebuild at every open


def repair_hint(path: Path) -> str:
    """What a corruption error tells the user to run: `check --repair` rebuilds the KB from the
    chunks it stores (`index` cannot: it opens the KB first)."""
    return f"repair it with `logicroute check --repair --kb {path}` (`logicroute check --kb {path}` lists the damage)"


def decode_chunks(path: Path, data: bytes, name: str = CHUNKS) -> list[Chunk]:
    chunks: list[Chunk] = []
    for ln, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            chunks.append(Chunk.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError) as e:
            raise KBCorruptError(f"{path / name} line {ln} is malformed ({e}); {repair_hint(path)}") from e
    return chunks


def decode_vectors(path: Path, data: bytes, name: str = VECTORS) -> np.ndarray:
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise KBCorruptError(f"{path / name} is unreadable ({e}); {repair_hint(path)}") from e


def check_counts(
    path: Path, n_chunks: int, dim: int, chunks: list[Chunk], vectors: np.ndarray, vstore: Any | None
) -> None:
    """The files agree with each other and with the manifest's chunk count and dimension.
    vstore: a faiss store, None for a shared store (Milvus: its rows are checked by
    `logicroute check`, not by every reader that opens the KB)."""
    counts = {
        "chunks": len(chunks),
        "vector rows": int(vectors.shape[0]) if vectors.ndim == 2 else -1,
    }
    if vstore is not None:
        counts["index rows"] = vstore.count()
    index_dim = dim if vstore is None else vstore.index.d
    bad = {k: v for k, v in counts.items() if v != n_chunks}
    if bad or vectors.ndim != 2 or vectors.shape[1] != dim or index_dim != dim or vectors.dtype != np.float32:
        raise KBCorruptError(
            f"knowledge base {path} is inconsistent: manifest says {n_chunks} chunks of dim {dim}, files have "
            + ", ".join(f"{k}={v}" for k, v in counts.items())
            + f", vectors {vectors.dtype} {tuple(vectors.shape)}, index dim {index_dim}; {repair_hint(path)}"
        )
    if len({c.id for c in chunks}) != len(chunks):
        raise KBCorruptError(f"knowledge base {path} has duplicate chunk ids; {repair_hint(path)}")
