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


def repair_hint(path: Path) -> str:
    """What a corruption error tells the user to run: `repair` rebuilds the KB from the chunks it
    stores (`index` cannot: it opens the KB first)."""
    return f"repair it with `logicroute repair --kb {path}` (`logicroute check --kb {path}` lists the damage)"


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
    return decode_chunks(path, data[CHUNKS]), decode_vectors(path, data[VECTORS]), decode_index(path, data[INDEX])


def decode_chunks(path: Path, data: bytes) -> list[Chunk]:
    chunks: list[Chunk] = []
    for ln, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            chunks.append(Chunk.from_dict(json.loads(line)))
        except (ValueError, KeyError, TypeError) as e:
            raise KBCorruptError(f"{path / CHUNKS} line {ln} is malformed ({e}); {repair_hint(path)}") from e
    return chunks


def decode_vectors(path: Path, data: bytes) -> np.ndarray:
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise KBCorruptError(f"{path / VECTORS} is unreadable ({e}); {repair_hint(path)}") from e


def decode_index(path: Path, data: bytes):
    try:
        import faiss

        return faiss.deserialize_index(np.frombuffer(data, dtype=np.uint8))
    except Exception as e:  # faiss raises RuntimeError with C++ text
        raise KBCorruptError(f"{path / INDEX} is unreadable ({e}); {repair_hint(path)}") from e


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
            + f", vectors {vectors.dtype} {tuple(vectors.shape)}, index dim {index.d}; {repair_hint(path)}"
        )
    if len({c.id for c in chunks}) != len(chunks):
        raise KBCorruptError(f"{path / CHUNKS} has duplicate chunk ids; {repair_hint(path)}")
