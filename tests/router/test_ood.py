"""The out-of-distribution guard: the measure and its threshold, what a trained router stores
and serves, checkpoints with and without a reference set, and what `route` prints."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from engine.core.decide import Decider
from engine.floor.base.errors import CheckpointError
from router.checkpoint import (
    DEFAULT_CHECKPOINT,
    load_checkpoint,
    load_guard,
    load_router,
    read_card,
    save_checkpoint,
)
from router.model import RouterConfig, RouterMLP
from router.ood import REFERENCE_TENSOR, OodGuard, build_guard, leave_one_out_similarity
from tests.fakes import HashedBowEmbedder

pytestmark = pytest.mark.usefixtures("one_thread")

DIM = 128  # wide enough that the hashed words of these questions rarely collide
NEAR = "What is the capital city of land 4?"  # a training question with one word more
UNRELATED = "Photosynthesis converts sunlight into chemical energy in green plants."


def embedder() -> HashedBowEmbedder:
    return HashedBowEmbedder("tiny-bow", DIM)


def training_questions(n: int = 24) -> list[str]:
    return [
        f"Who was born first, person {i} or person {i + 1}?" if i % 2 else f"What is the capital of land {i}?"
        for i in range(n)
    ]


def label_file(path, questions):
    from hierarchy.datasets import Question
    from training.labels.label_scorers import LabelConfig
    from training.labels.labels import make_row

    cfg = LabelConfig(scorer="retrieval", routes=("chunk", "logic"))
    costs = {"chunk": {"tokens_est": 540}, "logic": {"tokens_est": 1780}}
    rows = []
    for i, text in enumerate(questions):
        q = Question(id=f"q{i}", text=text, answers=["x"], type=None, supporting=[], dataset="toy")
        rows.append(make_row(q, {"chunk": 0.5 if "first" in text else 1.0, "logic": 1.0}, costs, cfg, index=i))
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def generalist(tmp_path_factory):
    from training.fitting.fit import TrainConfig
    from training.fitting.train import train_generalist

    d = tmp_path_factory.mktemp("ood")
    labels = label_file(d / "labels.jsonl", training_questions())
    train_generalist(
        [labels], d / "g.ckpt", TrainConfig(hidden=(8, 4), max_epochs=2, batch_size=8), embedder=embedder()
    )
    return d / "g.ckpt"


# ---------------------------------------------------------------- the measure


def test_threshold_is_the_quantile_of_leave_one_out_nearest_similarity():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 8)).astype(np.float32)
    guard = build_guard(x, quantile=0.1)
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    # brute force, on the rows as stored (float16)
    u16 = unit.astype(np.float16).astype(np.float32)
    u16 /= np.linalg.norm(u16, axis=1, keepdims=True)
    loo = [max(float(u16[i] @ u16[j]) for j in range(200) if j != i) for i in range(200)]
    assert guard.threshold == pytest.approx(float(np.quantile(loo, 0.1)), abs=1e-5)
    np.testing.assert_allclose(np.sort(leave_one_out_similarity(u16)), np.sort(loo), atol=1e-5)
    # about the quantile's share of the training rows sits below the threshold
    assert 0.05 <= np.mean(np.array(loo) < guard.threshold) <= 0.15
    assert guard.info["quantile"] == 0.1 and guard.card_entry()["reference_rows"] == 200


def test_repeated_questions_do_not_lift_the_threshold():
    x = np.random.default_rng(1).normal(size=(100, 8))
    once, twice = build_guard(x), build_guard(np.concatenate([x, x]))
    assert len(twice.reference) == 100 and twice.threshold == pytest.approx(once.threshold)
    assert build_guard(np.ones((5, 8))) is None  # one distinct question: no nearest neighbour
    assert build_guard(np.zeros((0, 8))) is None


def test_the_reference_set_is_capped_by_a_seeded_sample():
    x = np.random.default_rng(2).normal(size=(300, 8))
    a, b = build_guard(x, max_rows=50, seed=3), build_guard(x, max_rows=50, seed=3)
    assert a.reference.shape == (50, 8) and a.reference.dtype == np.float16
    np.testing.assert_array_equal(a.reference, b.reference)
    assert a.info["distinct_questions"] == 300


def test_near_and_unrelated_questions():
    emb = embedder()
    guard = build_guard(emb.encode(training_questions()))
    near, unrelated, seen = guard.measure(emb.encode([NEAR, UNRELATED, training_questions()[5]]))
    assert near["far"] is False and near["similarity"] >= near["threshold"]
    assert unrelated["far"] is True and unrelated["similarity"] < 0.3
    assert seen["similarity"] == pytest.approx(1.0, abs=1e-3)


# ---------------------------------------------------------------- a trained router


def test_a_trained_router_flags_an_unrelated_question(generalist):
    card = read_card(generalist)
    assert card["ood"]["reference_rows"] == 24 and card["ood"]["quantile"] == 0.02
    assert card["ood"]["sources"][0].endswith("labels.jsonl")
    router = load_router(generalist, embedder=embedder())
    near, unrelated = router.ood([NEAR, UNRELATED])
    assert not near["far"] and unrelated["far"]
    assert near["threshold"] == unrelated["threshold"] == pytest.approx(card["ood"]["threshold"], abs=1e-4)
    (d,) = Decider().decide_many(router, [UNRELATED])
    assert d.ood == unrelated and d.to_dict()["ood"] == unrelated
    many = Decider().decide_many(router, [NEAR, UNRELATED])
    assert [m.ood["far"] for m in many] == [False, True]
    assert [m.probs for m in many] == router.probs([NEAR, UNRELATED])


def test_a_decision_embeds_its_questions_once(generalist):
    emb = embedder()
    router = load_router(generalist, embedder=emb)
    Decider().decide_many(router, [NEAR, UNRELATED])
    Decider().decide_many(router, [NEAR])
    assert emb.calls == [[NEAR, UNRELATED], [NEAR]]  # probabilities and guard share each batch


def test_the_reference_set_round_trips_through_safetensors(generalist, tmp_path):
    card = read_card(generalist)
    guard = load_guard(generalist, card)
    assert guard.reference.shape == (24, DIM) and guard.reference.dtype == np.float16
    assert guard.threshold == card["ood"]["threshold"]
    header = json.loads(generalist.read_bytes()[8 : 8 + int.from_bytes(generalist.read_bytes()[:8], "little")])
    assert header[REFERENCE_TENSOR]["dtype"] == "F16"  # a plain tensor beside the weights: nothing pickled
    model, _ = load_checkpoint(generalist)  # the extra tensor is no weight: strict loading still works
    again = save_checkpoint(tmp_path / "again.ckpt", model, card, guard)
    back = load_guard(tmp_path / "again.ckpt", again)
    np.testing.assert_array_equal(back.reference, guard.reference)
    assert back.threshold == guard.threshold


def test_a_specialist_fine_tunes_at_its_generalists_cost_weight_unless_given_its_own(tmp_path):
    from training.fitting.fit import TrainConfig, specialist_config
    from training.fitting.train import train_generalist, train_specialist

    labels = label_file(tmp_path / "labels.jsonl", training_questions())
    parent = tmp_path / "g.ckpt"
    small = {"hidden": (8, 4), "max_epochs": 1}
    train_generalist([labels], parent, TrainConfig(batch_size=8, cost_weight=0.3, **small), embedder=embedder())
    target = label_file(tmp_path / "target.jsonl", [f"Which river flows through town {i}?" for i in range(20)])
    inherited, own = tmp_path / "inherited.ckpt", tmp_path / "own.ckpt"
    train_specialist(parent, [target], inherited, specialist_config(**small), embedder=embedder())
    train_specialist(parent, [target], own, specialist_config(cost_weight=0.0, **small), embedder=embedder())
    assert read_card(inherited)["training"]["config"]["cost_weight"] == 0.3
    assert read_card(own)["training"]["config"]["cost_weight"] == 0.0


def test_a_specialist_keeps_its_parents_reference_set(generalist, tmp_path):
    from training.fitting.fit import specialist_config
    from training.fitting.train import train_specialist

    target = [f"Which river flows through town {i}?" for i in range(20)]
    labels = label_file(tmp_path / "target.jsonl", target)
    out = tmp_path / "s.ckpt"
    train_specialist(generalist, [labels], out, specialist_config(max_epochs=1, hidden=(8, 4)), embedder=embedder())
    card = read_card(out)
    assert card["kind"] == "specialist" and card["ood"]["sources"][0] == f"parent {generalist}"
    # the parent's 24 questions and the 16 of the target set it trained on (the rest held out)
    assert card["ood"]["reference_rows"] == 24 + 16
    near_parent, near_target, unrelated = load_router(out, embedder=embedder()).ood(
        [NEAR, "Which river flows through town 7?", UNRELATED]
    )
    assert not near_parent["far"] and not near_target["far"] and unrelated["far"]


# ---------------------------------------------------------------- checkpoints without a guard


def old_checkpoint(path):
    torch.manual_seed(0)
    m = RouterMLP(RouterConfig(routes=("chunk", "logic"), embed_dim=DIM, features=(), hidden=(8, 4)))
    card = save_checkpoint(path, m, {"embedder": {"id": "tiny-bow", "dim": DIM}, "ood": {"threshold": 0.3}})
    assert "ood" not in card  # no reference set given: a card copied from elsewhere loses its entry
    return path


def test_a_checkpoint_without_a_reference_set_routes_without_a_guard(tmp_path):
    router = load_router(old_checkpoint(tmp_path / "old.ckpt"), embedder=embedder())
    assert router.guard is None
    assert router.ood([NEAR, UNRELATED]) == [None, None]
    assert [m.ood for m in Decider().decide_many(router, [NEAR, UNRELATED])] == [None, None]


def test_a_reference_set_without_its_card_entry_is_refused(tmp_path):
    path = old_checkpoint(tmp_path / "old.ckpt")
    with pytest.raises(CheckpointError, match="reference set"):
        load_guard(path, {**read_card(path), "ood": {"threshold": 0.3}})
    guard = OodGuard(np.ones((2, DIM)), 0.5, {})
    save_checkpoint(tmp_path / "g.ckpt", load_checkpoint(path)[0], read_card(path), guard)
    with pytest.raises(CheckpointError, match="reference set"):
        load_guard(tmp_path / "g.ckpt", {k: v for k, v in read_card(tmp_path / "g.ckpt").items() if k != "ood"})


def test_the_shipped_checkpoint_loads_with_or_without_a_guard():
    guard = load_guard(DEFAULT_CHECKPOINT, read_card(DEFAULT_CHECKPOINT))
    assert guard is None or guard.dim == read_card(DEFAULT_CHECKPOINT)["config"]["embed_dim"]


# ---------------------------------------------------------------- logicroute ask --dry-run


def test_a_dry_run_reports_the_ood_flag(generalist, tmp_path):
    from engine.face.cli import main

    run = CliRunner()

    def invoke(*args):
        args = ["ask", "--dry-run", *map(str, args)]
        res = run.invoke(main, args, obj={"embedder": embedder()}, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    out = json.loads(invoke(UNRELATED, "--set", f"checkpoint={generalist}", "--json"))
    assert out["ood"]["far"] is True and out["ood"]["similarity"] < out["ood"]["threshold"]
    assert "ood: FAR" in invoke(UNRELATED, "--set", f"checkpoint={generalist}")
    assert "ood: near" in invoke(NEAR, "--set", f"checkpoint={generalist}")

    qfile = tmp_path / "qs.jsonl"
    qfile.write_text(json.dumps({"question": NEAR}) + "\n" + json.dumps({"question": UNRELATED}) + "\n")
    lines = [json.loads(x) for x in invoke("--questions", qfile, "--set", f"checkpoint={generalist}").splitlines()]
    assert [x["question"] for x in lines] == [NEAR, UNRELATED]
    assert [x["ood"]["far"] for x in lines] == [False, True]

    old = old_checkpoint(tmp_path / "old.ckpt")
    assert json.loads(invoke(UNRELATED, "--set", f"checkpoint={old}", "--json"))["ood"] is None
    assert "ood: no guard" in invoke(UNRELATED, "--set", f"checkpoint={old}")
    assert json.loads(invoke("--questions", qfile, "--set", f"checkpoint={old}").splitlines()[0])["ood"] is None
