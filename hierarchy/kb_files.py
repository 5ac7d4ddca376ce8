"""The data files of a knowledge base as bytes and back: chunks.jsonl, vectors.npy and
index.faiss (see hierarchy.kb for the layout, hierarchy.store for how they are committed)."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from engine.base.errors import KBCorruptError
from hierarchy.documents import Chunk

CHUNKS = "chunks.jsonl"
VECTORS = "vectors.npy"
INDEX = "index.faiss"
DATA_FILES = (CHUNKS, VECTORS, INDEX)
REBUILD_HINT = "rebuild it: delete the folder and run `logicroute index SOURCES --kb DIR` again"


def flat_index(vectors: np.ndarray, dim: int):
    """An exact inner-product index over the vectors (inner product = cosine on unit vectors)."""
    import faiss

    index = faiss.IndexFlatIP(dim)
    if len(vectors):
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def appended_index(index, new_vecs: np.ndarray):
    """A copy of `index` with `new_vecs` appended; `index` itself stays as it is."""
    import faiss

    index = faiss.clone_index(index)
    if len(new_vecs):
        index.add(np.ascontiguousarray(new_vecs, dtype=np.float32))
    return index


def encode(chunks: Sequence[Chunk], vectors: np.ndarray, index) -> dict[str, bytes]:
    """File name -> bytes of the three data files."""
    import faiss

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
    return {
        CHUNKS: "".join(json.dumps(c.to_dict(), ensure_ascii=False) + "\n" for c in chunks).encode("utf-8"),
        VECTORS: buf.getvalue(),
        INDEX: faiss.serialize_index(index).tobytes(),
    }


def decode(path: Path, data: dict[str, bytes]) -> tuple[list[Chunk], np.ndarray, Any]:
    """(chunks, vectors, index) from the bytes of the data files of the KB at `path`."""
    chunks: list[Chunk] = []
    for ln, line in enumerate(data[CHUNKS].decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            chunks.append(Chunk.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError) as e:
            raise KBCorruptError(f"{path / CHUNKS} line {ln} is malformed ({e}); {REBUILD_HINT}") from e
    try:
        vectors = np.load(io.BytesIO(data[VECTORS]), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise KBCorruptError(f"{path / VECTORS} is unreadable ({e}); {REBUILD_HINT}") from e
    try:
        import faiss

        index = faiss.deserialize_index(np.frombuffer(data[INDEX], dtype=np.uint8))
    except Exception as e:  # faiss raises RuntimeError with C++ text
        raise KBCorruptError(f"{path / INDEX} is unreadable ({e}); {REBUILD_HINT}") from e
    return chunks, vectors, index


def check_counts(path: Path, n_chunks: int, dim: int, chunks: list[Chunk], vectors: np.ndarray, index) -> None:
    """The files agree with each other and with the manifest's chunk count and dimension."""
    counts = {
        "chunks.jsonl lines": len(chunks),
        "vectors.npy rows": int(vectors.shape[0]) if vectors.ndim == 2 else -1,
        "index.faiss vectors": int(index.ntotal),
    }
    bad = {k: v for k, v in counts.items() if v != n_chunks}
    if bad or vectors.ndim != 2 or vectors.shape[1] != dim or index.d != dim or vectors.dtype != np.float32:
        raise KBCorruptError(
            f"knowledge base {path} is inconsistent: manifest says {n_chunks} chunks of dim {dim}, files have "
            + ", ".join(f"{k}={v}" for k, v in counts.items())
            + f", vectors {vectors.dtype} {tuple(vectors.shape)}, index dim {index.d}; {REBUILD_HINT}"
        )
    if len({c.id for c in chunks}) != len(chunks):
        raise KBCorruptError(f"{path / CHUNKS} has duplicate chunk ids; {REBUILD_HINT}")
