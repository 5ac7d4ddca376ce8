"""Router checkpoints and the `Router` that serves them.

A checkpoint NAME.ckpt is one safetensors file (weights only: nothing is unpickled on load)
whose header metadata holds the card as JSON; NAME.card.json next to it is the same card,
pretty-printed for people. The card records the embedder (id, dim), feature set, route
names, architecture, training data and counts, label scorer and LLM, held-out metrics and
the date. Loading checks the inputs: a router trained on other embeddings, or on features
that this code computes differently (each feature's version is in the card, router.features),
would route garbage, so a mismatch is a CheckpointError naming both sides.

A checkpoint may also hold the out-of-distribution guard (router.ood): a reference set of
training-question embeddings as one more tensor, its threshold in the card's "ood" entry.
Checkpoints without it load as before and route without a guard.

torch, safetensors and the embedder load inside functions: importing this is cheap.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from engine.floor.base.errors import CheckpointError
from engine.floor.base.files import atomic_write_bytes

if TYPE_CHECKING:
    from engine.floor.question.parse import Question
    from router.list_gate import ListGate
    from router.model import RouterMLP
    from router.ood import OodGuard

FORMAT = "logicroute-router/1"
CARD_KEY = "logicroute_card"
CHECKPOINT_DIR = Path(__file__).resolve().parents[1] / "checkpoints"
DEFAULT_CHECKPOINT = CHECKPOINT_DIR / "generalist.ckpt"


def card_path(ckpt: str | Path) -> Path:
    p = Path(ckpt)
    return p.with_name(p.name[: -len(".ckpt")] + ".card.json" if p.name.endswith(".ckpt") else p.name + ".card.json")


def save_checkpoint(
    path: str | Path,
    model: "RouterMLP",
    card: dict,
    guard: "OodGuard | None" = None,
    gate: "ListGate | None" = None,
) -> dict:
    """Write weights + card (embedded and beside), the guard's reference set and the list gate
    when given. Returns the full card as written."""
    import torch
    from safetensors.torch import save

    from router.list_gate import GATE_TENSOR
    from router.ood import REFERENCE_TENSOR

    full = dict(card)
    full["format"] = FORMAT
    full["config"] = model.config.to_dict()
    full["routes"] = list(model.config.routes)
    full.setdefault("embedder", {})
    full["embedder"].setdefault("dim", model.config.embed_dim)
    full.setdefault("created", _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"))
    tensors = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    full.pop("ood", None)  # a card copied from a parent must not describe a reference set this file lacks
    if guard is not None:
        tensors[REFERENCE_TENSOR] = torch.from_numpy(guard.reference.copy())
        full["ood"] = guard.card_entry()
    full.pop("list_gate", None)  # the same for a gate
    if gate is not None:
        tensors[GATE_TENSOR] = torch.from_numpy(gate.tensor())
        full["list_gate"] = gate.card_entry()
    blob = save(tensors, metadata={CARD_KEY: json.dumps(full, sort_keys=True)})
    path = Path(path)
    # A shipped checkpoint must be readable by every user of the install.
    atomic_write_bytes(path, blob, mode=0o644)
    atomic_write_bytes(card_path(path), (json.dumps(full, indent=2, ensure_ascii=False) + "\n").encode(), mode=0o644)
    return full


def read_card(path: str | Path) -> dict:
    """The card embedded in a checkpoint (no torch needed)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"router checkpoint {path} not found")
    try:
        with open(path, "rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if not 0 < n < 10_000_000:
                raise ValueError("bad header length")
            header = json.loads(f.read(n))
        card = json.loads(header["__metadata__"][CARD_KEY])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise CheckpointError(f"{path}: not a logicroute router checkpoint ({type(e).__name__}: {e})") from None
    if card.get("format") != FORMAT:
        raise CheckpointError(f"{path}: checkpoint format {card.get('format')!r}, expected {FORMAT!r}")
    return card


def load_checkpoint(path: str | Path) -> tuple["RouterMLP", dict]:
    """(model in eval mode, card). Weights come from safetensors: no pickle."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from router.list_gate import GATE_TENSOR
    from router.model import RouterConfig, RouterMLP
    from router.ood import REFERENCE_TENSOR

    card = read_card(path)
    check_inputs(card, path)
    try:
        model = RouterMLP(RouterConfig.from_dict(card["config"]))
        state = load_file(str(path))
        state.pop(REFERENCE_TENSOR, None)
        state.pop(GATE_TENSOR, None)
        model.load_state_dict(state, strict=True)
    except (KeyError, ValueError, RuntimeError, SafetensorError) as e:
        raise CheckpointError(f"{path}: weights do not match the card ({type(e).__name__}: {e})") from None
    model.eval()
    return model, card


def load_guard(path: str | Path, card: dict) -> "OodGuard | None":
    """The checkpoint's out-of-distribution guard, or None when it stores none."""
    from router.ood import REFERENCE_TENSOR, OodGuard

    return OodGuard.from_checkpoint(_stored_tensor(path, REFERENCE_TENSOR, "reference set"), card, path)


def load_gate(path: str | Path, card: dict) -> "ListGate | None":
    """The checkpoint's list gate (router.list_gate), or None when it stores none."""
    from router.list_gate import GATE_TENSOR, ListGate

    return ListGate.from_checkpoint(_stored_tensor(path, GATE_TENSOR, "list gate"), card, path)


def _stored_tensor(path: str | Path, name: str, what: str):
    """One optional tensor of the checkpoint as numpy, None when it has none. Read through
    safetensors (no pickle), only that tensor; an unreadable file is a CheckpointError naming `what`."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy") as f:
            names = f.keys()  # safe_open supports no `in`
            return f.get_tensor(name) if name in names else None
    except (OSError, SafetensorError) as e:
        raise CheckpointError(f"{path}: unreadable {what} ({type(e).__name__}: {e})") from None


def check_inputs(card: dict, path: str | Path = "") -> None:
    """CheckpointError when this code cannot build the inputs the router was trained on: a
    feature it does not compute, a feature computed differently now (its version), or an
    unknown embedded text form. The embedder is checked when one is given (check_embedder)."""
    from router.features import TEXT_FORMS, feature_set_problem

    config = card.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("features", []), list):
        raise CheckpointError(f"router checkpoint {path}: its card has no valid config")
    problem = feature_set_problem(config.get("features", []), config.get("feature_versions"))
    if problem:
        raise CheckpointError(
            f"router checkpoint {path} cannot be served by this version of logicroute: {problem}. "
            "Use the logicroute version that trained it, or retrain the router (`logicroute train`)"
        )
    form = config.get("text_form", "question")
    if form not in TEXT_FORMS:
        raise CheckpointError(
            f"router checkpoint {path} embeds the text form {form!r}, which this version of logicroute "
            f"does not know (known: {', '.join(TEXT_FORMS)})"
        )


def check_embedder(card: dict, embedder, path: str | Path = "") -> None:
    """CheckpointError when the embedder is not the one the router was trained on."""
    want = card.get("embedder", {})
    want_id, want_dim = want.get("id"), want.get("dim")
    have_id = getattr(embedder, "id", None)
    if want_id != have_id:
        raise CheckpointError(
            f"router checkpoint {path} was trained on embedder {want_id!r} (dim {want_dim}), "
            f"but the embedder in use is {have_id!r} (dim {getattr(embedder, 'dim', '?')}): "
            "train a router for this embedder or use the matching one"
        )
    have_dim = getattr(embedder, "dim", None)
    if want_dim != have_dim:
        raise CheckpointError(
            f"router checkpoint {path} expects embedder {want_id!r} with dim {want_dim}, "
            f"but the embedder in use {have_id!r} has dim {have_dim}"
        )


class Router:
    """A loaded router: `.probs(questions)`, `.ood(questions)` and the list gate's probabilities
    (`.probs_ood_and_lists`); engine.core.decide's Decider turns them into a route.
    Deterministic: the model stays in eval mode and no Gumbel noise is drawn at inference.
    `guard` None: no out-of-distribution guard (the checkpoint stores no reference set); `gate`
    None: no list gate (router.list_gate)."""

    def __init__(
        self,
        model: "RouterMLP",
        card: dict,
        embedder,
        path: str | Path | None = None,
        guard: "OodGuard | None" = None,
        gate: "ListGate | None" = None,
    ):
        check_embedder(card, embedder, path or "")
        self.model = model.eval()
        self.card = card
        self.embedder = embedder
        self.path = Path(path) if path else None
        self.routes: tuple[str, ...] = tuple(model.config.routes)
        self.features: tuple[str, ...] = tuple(model.config.features)
        self.guard = guard
        self.gate = gate
        self.label: str | None = None  # how a trace names this router (router.kb_router sets it)

    @property
    def escalate_below(self) -> float | None:
        """The confidence under which a cheap answer goes on to logic, calibrated by `logicroute
        adapt` on its KB's own questions; None for a router that was not adapted."""
        value = (self.card.get("adapted") or {}).get("escalate_below")
        return None if value is None else float(value)

    @property
    def calibrated_style(self) -> str | None:
        """The answer style escalate_below was calibrated in (a phrase's confidence is not a sentence's)."""
        return (self.card.get("adapted") or {}).get("style")

    def inputs(self, questions: Sequence[str | Question]):
        from router.features import build_inputs

        return build_inputs(list(questions), self.embedder, self.features, text_form=self.model.config.text_form)

    def probs_array(self, questions: Sequence[str]):
        """(n, routes) numpy array of probabilities."""
        import numpy as np

        if not questions:
            return np.zeros((0, len(self.routes)), dtype=np.float32)
        return self.model.predict_proba(self.inputs(questions))

    def probs(self, questions: Sequence[str]) -> list[dict[str, float]]:
        return self._probs_of(self.probs_array(questions))

    def ood(self, questions: Sequence[str]) -> list[dict | None]:
        """Per question {similarity, threshold, far}: how close its embedded text comes to the
        training questions (router.ood). None for each when the checkpoint has no guard."""
        if self.guard is None or not questions:
            return [None] * len(questions)
        return self._ood_of(self.inputs(questions))

    def probs_and_ood(self, questions: Sequence[str]) -> tuple[list[dict[str, float]], list[dict | None]]:
        """`probs` and `ood` from one embedding batch."""
        return self.probs_ood_and_lists(questions)[:2]

    def probs_ood_and_lists(
        self, questions: Sequence[str | Question]
    ) -> tuple[list[dict[str, float]], list[dict | None], list[float | None]]:
        """`probs`, `ood` and, per question, the list gate's probability where it fires (else
        None; all None without a gate), from one embedding batch."""
        if not questions:
            return [], [], []
        x = self.inputs(questions)
        listed = [None] * len(x) if self.gate is None else self.gate.fires(x[:, : self.embed_dim], questions)
        return self._probs_of(self.model.predict_proba(x)), self._ood_of(x), listed

    @property
    def embed_dim(self) -> int:
        return int(self.model.config.embed_dim)

    def _probs_of(self, p) -> list[dict[str, float]]:
        return [{r: float(v) for r, v in zip(self.routes, row)} for row in p]

    def _ood_of(self, x) -> list[dict | None]:
        if self.guard is None:
            return [None] * len(x)
        return self.guard.measure(x[:, : self.embed_dim])


def load_router(path: str | Path | None = None, embedder=None) -> Router:
    """Load a router; path None = the shipped checkpoints/generalist.ckpt. embedder None =
    the process-wide shared embedder (engine.floor.embedder.get_embedder)."""
    path = Path(path) if path else DEFAULT_CHECKPOINT
    model, card = load_checkpoint(path)
    guard, gate = load_guard(path, card), load_gate(path, card)
    if embedder is None:
        from engine.floor.embedder import get_embedder

        embedder = get_embedder()
    return Router(model, card, embedder, path, guard, gate)
