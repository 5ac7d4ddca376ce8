"""Summary layers on disk, and the loaded trees shared within a process.

Files under kb.path/"layers"/, committed through hierarchy.store with meta.json as the commit
record. Data files carry the generation in their name and meta.json, written last, names the
live generation, so an interrupted save leaves the previous generation readable:
  meta.json                   summarizer, parameters, embedder id, build/update costs, files
  nodes.<gen>.json            levels (node ids per level) and nodes {level, parent, children, units, text}
  assignment.<gen>.json       chunk id -> level-1 node id
  level_<l>.<gen>.faiss       IndexFlatIP over level l's node embeddings, rows in level order

The KB's manifest carries a summary of the layers under "summaries" (KnowledgeBase.annotate).
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.base.errors import KBCorruptError, KBError
from hierarchy import store
from hierarchy.kb import LAYERS_DIR
from hierarchy.layers.tree import Layers, Node

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.kb import KnowledgeBase

META = "meta.json"
MANIFEST_ENTRY = "summaries"

_CACHE: dict[str, tuple[str, Layers]] = {}  # layers folder -> (generation, its loaded tree)
_CACHE_LOCK = threading.Lock()


def layers_dir(kb: "KnowledgeBase") -> Path:
    return kb.path / LAYERS_DIR


def layers_key(kb: "KnowledgeBase") -> str:
    """The KB's layers, named the same from every KnowledgeBase object on that folder."""
    return str(layers_dir(kb).resolve())


def _json_bytes(obj: Any) -> bytes:
    # The bytes atomic_write_json(..., indent=None) writes.
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")


def save_layers(kb: "KnowledgeBase", layers: Layers) -> None:
    """Commit a new generation of files (meta.json last), drop older ones, then record the
    layers' summary in the KB's manifest."""
    import faiss

    gen = uuid.uuid4().hex[:12]
    files: dict[str, Any] = {"nodes": f"nodes.{gen}.json", "assignment": f"assignment.{gen}.json", "levels": []}
    payload: dict[str, bytes] = {}
    for lvl, mat in enumerate(layers.vectors, 1):
        index = faiss.IndexFlatIP(kb.embedder.dim)
        if len(mat):
            index.add(np.ascontiguousarray(mat, dtype=np.float32))
        name = f"level_{lvl}.{gen}.faiss"
        payload[name] = faiss.serialize_index(index).tobytes()
        files["levels"].append(name)
    payload[files["nodes"]] = _json_bytes(
        {
            "generation": gen,
            "levels": layers.levels,
            "nodes": {
                nid: {"level": n.level, "parent": n.parent, "children": n.children, "units": n.units, "text": n.text}
                for nid, n in layers.nodes.items()
            },
        }
    )
    payload[files["assignment"]] = _json_bytes({"generation": gen, "chunks": layers.assignment()})
    meta = layers.meta
    level1 = layers.levels[0] if layers.levels else []
    meta.update(
        generation=gen,
        files=files,
        levels=len(layers.levels),
        nodes_per_level=[len(x) for x in layers.levels],
        chunks=sum(len(layers.nodes[i].children) for i in level1),
    )
    store.commit(layers_dir(kb), META, meta, payload, prune=True)
    kb.annotate(
        MANIFEST_ENTRY,
        {
            "summarizer": meta["summarizer"],
            "llm": meta.get("llm"),
            "levels": meta["levels"],
            "nodes_per_level": meta["nodes_per_level"],
            "build": meta.get("build"),
            "last_update": (meta.get("updates") or [None])[-1],
            "since_build": meta.get("since_build"),
        },
    )
    with _CACHE_LOCK:
        _CACHE[layers_key(kb)] = (gen, layers)


def read_layers(kb: "KnowledgeBase") -> Layers | None:
    """Load from disk (no cache), or None when never built. Retries once if a writer swapped
    generations mid-read."""
    d = layers_dir(kb)
    for attempt in range(2):
        try:
            return _read_once(kb, d)
        except FileNotFoundError:
            if attempt:
                raise KBCorruptError(
                    f"{d}: summary layer files are missing; rebuild them (logicroute index ... --summaries extractive)"
                ) from None
    return None


def _read_once(kb: "KnowledgeBase", d: Path) -> Layers | None:
    import faiss

    meta_path = d / META
    if not meta_path.is_file():
        return None
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        files = meta["files"]
        nj = json.loads((d / files["nodes"]).read_text(encoding="utf-8"))
        vectors = []
        for name in files["levels"]:
            index = faiss.deserialize_index(np.frombuffer(bytearray((d / name).read_bytes()), dtype=np.uint8))
            vectors.append(index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, index.d), np.float32))
    except FileNotFoundError:
        raise
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise KBCorruptError(
            f"{d}: unreadable summary layers ({type(e).__name__}: {e}); rebuild them with --rebuild"
        ) from None
    if (
        nj.get("generation") != meta.get("generation")
        or len(vectors) != len(nj["levels"])
        or any(len(v) != len(ids) for v, ids in zip(vectors, nj["levels"]))
    ):
        raise KBCorruptError(f"{d}: summary layer files disagree with meta.json; rebuild them with --rebuild")
    emb = kb.embedder.id
    if meta.get("embedder") and emb and meta["embedder"] != emb:
        raise KBError(
            f"{d}: summary layers were embedded with {meta['embedder']}, the KB now uses {emb}; "
            f"rebuild them with --rebuild"
        )
    nodes = {
        nid: Node(nid, int(n["level"]), list(n["children"]), n.get("parent"), [list(u) for u in n["units"]])
        for nid, n in nj["nodes"].items()
    }
    return Layers(
        nodes=nodes,
        levels=[list(x) for x in nj["levels"]],
        vectors=[np.asarray(v, dtype=np.float32) for v in vectors],
        meta=meta,
    )


def load_layers(kb: "KnowledgeBase") -> Layers | None:
    """The KB's summary layers, or None when they were never built. Cached per KB folder and
    generation; the returned object is shared, do not modify it."""
    meta_path = layers_dir(kb) / META
    if not meta_path.is_file():
        return None
    key = layers_key(kb)
    try:
        gen = json.loads(meta_path.read_text(encoding="utf-8")).get("generation")
    except ValueError:
        raise KBCorruptError(f"{meta_path}: not valid JSON; rebuild the layers with --rebuild") from None
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None and hit[0] == gen:
        return hit[1]
    layers = read_layers(kb)
    if layers is not None:
        with _CACHE_LOCK:
            _CACHE[key] = (layers.meta.get("generation"), layers)
    return layers
