"""Summary layers on disk, and the loaded trees shared within a process.

Files under kb.path/"layers"/, committed through hierarchy.store with meta.json as the commit
record. Data files carry the generation in their name and meta.json, written last, names the
live generation, so an interrupted save leaves the previous generation readable:
  meta.json                   summarizer, parameters, embedder id, build/update costs, files
  nodes.<gen>.json            levels (node ids per level) and nodes {level, parent, children, units, text}
  assignment.<gen>.json       chunk id -> level-1 node id
  level_<l>.<gen>.faiss       IndexFlatIP over level l's node embeddings, rows in level order

meta.json also records which chunks the layers cover ("covers": count and sha1 of the sorted
chunk ids), so a writer or `logicroute check` sees that the layers lag the chunks (an update that
died) without reading the tree, and a fingerprint of each file it names.

The KB's manifest carries a summary of the layers under "summaries" (KnowledgeBase.annotate).
A save holds the KB's writer lock and refuses when the KB on disk is not the state the layers
were computed from, or when other layers were committed since they were read.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.floor.base.errors import KBCorruptError, KBError
from engine.floor.base.files import content_hash
from hierarchy import store
from hierarchy.kb import LAYERS_DIR
from hierarchy.kb_files import repair_hint
from hierarchy.kb_manifest import MANIFEST
from hierarchy.layers.tree import Layers, Node

if TYPE_CHECKING:  # pragma: no cover
    from hierarchy.kb import KnowledgeBase

META = "meta.json"
MANIFEST_ENTRY = "summaries"

_CACHE: dict[str, tuple[str, Layers]] = {}  # layers folder -> (generation, its loaded tree)
_CACHE_LOCK = threading.Lock()


def layers_dir(kb: "KnowledgeBase") -> Path:
    return kb.path / LAYERS_DIR


def has_summary_layers(kb: "KnowledgeBase") -> bool:
    """Whether summary layers were committed in the KB (reads meta.json only, loads no tree)."""
    return read_meta(Path(kb.path) / LAYERS_DIR) is not None


def layers_key(kb: "KnowledgeBase") -> str:
    """The KB's layers, named the same from every KnowledgeBase object on that folder."""
    return str(layers_dir(kb).resolve())


def covers(chunk_ids: Iterable[str]) -> dict:
    """What meta.json records about the chunks a tree covers: compare with covers(kb.chunk_ids)."""
    ids = sorted(chunk_ids)
    return {"chunks": len(ids), "sha1": content_hash("\n".join(ids))}


def read_meta(d: Path) -> dict | None:
    """meta.json of the layers folder `d`, or None when no layers were committed there."""
    meta_path = d / META
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        raise KBCorruptError(f"{meta_path}: not valid JSON; {repair_hint(d.parent)}") from None
    if not isinstance(meta, dict):
        raise KBCorruptError(f"{meta_path}: not a JSON object; {repair_hint(d.parent)}")
    return meta


def damaged_files(d: Path, meta: dict) -> list[str]:
    """The layer files that do not match the fingerprint meta.json records, as "name: missing" or
    "name: mismatch" (layers saved before meta.json recorded fingerprints are not covered)."""
    damaged = []
    for name, fp in (meta.get("fingerprints") or {}).items():
        try:
            data = (d / name).read_bytes()
        except FileNotFoundError:
            damaged.append(f"{d / name}: missing")
            continue
        if store.fingerprint(data) != fp:
            damaged.append(f"{d / name}: mismatch")
    return damaged


def _json_bytes(obj: Any) -> bytes:
    # The bytes atomic_write_json(..., indent=None) writes.
    return (json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8")


def save_layers(kb: "KnowledgeBase", layers: Layers, *, base_generation: str | None = None) -> None:
    """Commit a new generation of files (meta.json last), drop older ones, then record the
    layers' summary in the KB's manifest. base_generation: the generation the update started
    from (None for a full build, which replaces whatever is there)."""
    payload, files = _payload(kb, layers)
    meta = layers.meta
    level1 = layers.levels[0] if layers.levels else []
    meta.update(
        generation=files["generation"],
        files={k: v for k, v in files.items() if k != "generation"},
        fingerprints={name: store.fingerprint(b) for name, b in payload.items()},
        levels=len(layers.levels),
        nodes_per_level=[len(x) for x in layers.levels],
        chunks=sum(len(layers.nodes[i].children) for i in level1),
        covers=covers(layers.assignment()),
    )
    d = layers_dir(kb)

    def based_on_disk() -> None:
        # The chunk state these layers were computed from must be the committed one, and no
        # other layers may have landed since they were read: else they would undo that change.
        if store.recorded_files(kb.path / MANIFEST) != (kb.manifest.get("files") or {}):
            raise store.changed_error(kb.path)
        if base_generation is not None and (read_meta(d) or {}).get("generation") != base_generation:
            raise KBError(f"the summary layers in {d} were changed by another process; run the change again")

    with store.dir_lock(kb.path):  # one writer for the KB and its layers, from the check to the manifest
        store.commit(d, META, meta, payload, check=based_on_disk, prune=True)
        annotate_summary(kb, meta)
    with _CACHE_LOCK:
        _CACHE[layers_key(kb)] = (meta["generation"], layers)


def _payload(kb: "KnowledgeBase", layers: Layers) -> tuple[dict[str, bytes], dict[str, Any]]:
    """The files of a new generation (name -> bytes), and what meta.json names."""
    import faiss

    gen = uuid.uuid4().hex[:12]
    files: dict[str, Any] = {
        "generation": gen,
        "nodes": f"nodes.{gen}.json",
        "assignment": f"assignment.{gen}.json",
        "levels": [],
    }
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
    return payload, files


def annotate_summary(kb: "KnowledgeBase", meta: dict) -> None:
    """Record the layers' summary (of meta.json) in the KB's manifest."""
    kb.annotate(
        MANIFEST_ENTRY,
        {
            "generation": meta.get("generation"),
            "summarizer": meta["summarizer"],
            "llm": meta.get("llm"),
            "levels": meta["levels"],
            "nodes_per_level": meta["nodes_per_level"],
            "chunks": meta.get("chunks"),
            "build": meta.get("build"),
            "last_update": (meta.get("updates") or [None])[-1],
            "since_build": meta.get("since_build"),
        },
    )


def read_layers(kb: "KnowledgeBase") -> Layers | None:
    """Load from disk (no cache), or None when never built."""
    return read_layers_at(layers_dir(kb), kb.embedder.id)


def read_layers_at(d: Path, embedder_id: str | None = None) -> Layers | None:
    """The layers committed in folder `d` (None when never built), checked against the embedder
    id when given. Retries once if a writer swapped generations mid-read."""
    for attempt in range(2):
        try:
            return _read_once(d, embedder_id)
        except FileNotFoundError:
            if attempt:
                raise KBCorruptError(f"{d}: summary layer files are missing; {repair_hint(d.parent)}") from None
    return None


def _read_once(d: Path, embedder_id: str | None) -> Layers | None:
    import faiss

    meta = read_meta(d)
    if meta is None:
        return None
    try:
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
            f"{d}: unreadable summary layers ({type(e).__name__}: {e}); {repair_hint(d.parent)}"
        ) from None
    if (
        nj.get("generation") != meta.get("generation")
        or len(vectors) != len(nj["levels"])
        or any(len(v) != len(ids) for v, ids in zip(vectors, nj["levels"]))
    ):
        raise KBCorruptError(f"{d}: summary layer files disagree with meta.json; {repair_hint(d.parent)}")
    if meta.get("embedder") and embedder_id and meta["embedder"] != embedder_id:
        raise KBError(
            f"{d}: summary layers were embedded with {meta['embedder']}, the KB now uses {embedder_id}; "
            f"{repair_hint(d.parent)}"
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
    meta = read_meta(layers_dir(kb))
    if meta is None:
        return None
    key = layers_key(kb)
    gen = meta.get("generation")
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
    if hit is not None and hit[0] == gen:
        return hit[1]
    layers = read_layers(kb)
    if layers is not None:
        with _CACHE_LOCK:
            _CACHE[key] = (layers.meta.get("generation"), layers)
    return layers
