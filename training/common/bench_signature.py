"""What a stored benchmark answer must match to be reused (`bench docs`, `bench global-lists-answer`):
the question, the system's definition and the run's setup (LLM, passages per retrieval, style);
for a system the router decides for, also the router. Standard library only."""

from __future__ import annotations

import hashlib
import json


def answer_signature(question: str, system: dict, setup: dict, routed: bool) -> str:
    """16 hex digits over the question, the system's definition and `setup`; setup's "router"
    counts only for a `routed` system (the others answer the same whatever the router)."""
    own = setup if routed else {k: v for k, v in setup.items() if k != "router"}
    spec = {"q": question, "system": system, **own}
    return hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]


def router_fingerprint() -> str:
    """The shipped router's file hash (12 hex digits), setup's "router": a stored answer of another
    router is made again. A KB adapted by `logicroute adapt` answers with its own router: name such
    a run's --out apart."""
    from router.checkpoint import DEFAULT_CHECKPOINT

    return hashlib.sha1(DEFAULT_CHECKPOINT.read_bytes()).hexdigest()[:12]
