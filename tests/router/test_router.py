"""Router: MLP shapes, Gumbel-Softmax training, deterministic inference, calibration,
checkpoints, and the CLI commands on tiny data (a tiny hashed embedder, no MiniLM)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from engine.base.errors import CheckpointError
from router.checkpoint import DEFAULT_CHECKPOINT, Router, load_checkpoint, load_router, read_card, save_checkpoint
from router.features import ALL_FEATURES, build_inputs, cheap_features, feature_dim, normalize_question
from router.model import RouterConfig, RouterMLP, anneal_tau, gumbel_routing_loss
from router.policy import Policy, achieved_share, calibrate_share, decide, share_for_budget
from tests.fakes import HashedBowEmbedder


def tiny_embedder(id: str = "tiny-bow", dim: int = 16) -> HashedBowEmbedder:
    return HashedBowEmbedder(id, dim)


ROUTES = ("chunk", "logic")


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny tensors: one thread is fastest, and spares the shared CPU from spin-waiting."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def tiny_model(routes=ROUTES, dropout=0.5, features=ALL_FEATURES, dim=16) -> RouterMLP:
    torch.manual_seed(0)
    return RouterMLP(RouterConfig(routes=routes, embed_dim=dim, features=features, hidden=(8, 4), dropout=dropout))


# ---------------------------------------------------------------- features and model


def test_features_are_cheap_and_sensible():
    f = dict(zip(("spec", "len"), cheap_features(["Who directed the film Inception?"], ("specificity", "length"))[0]))
    assert 0 < f["spec"] < 1 and 0 < f["len"] < 1
    q = cheap_features(["Who was born first, Ada Lovelace or Alan Turing?", "what is a river"], ALL_FEATURES)
    assert q.shape == (2, feature_dim(ALL_FEATURES)) and q.dtype == np.float32
    comparison = feature_dim(ALL_FEATURES[: ALL_FEATURES.index("comparison")])  # its column
    assert q[0, comparison] == 1.0 and q[1, comparison] == 0.0
    assert normalize_question("  Who   is\tX? ") == "Who is X?"
    x = build_inputs(["Who is X?"], tiny_embedder(), ALL_FEATURES)
    assert x.shape == (1, 16 + feature_dim(ALL_FEATURES))
    with pytest.raises(ValueError):
        cheap_features(["x"], ("nope",))


def test_mlp_shapes_three_linear_layers():
    m = tiny_model(routes=("chunk", "summary", "logic"))
    linears = [x for x in m.modules() if isinstance(x, torch.nn.Linear)]
    assert len(linears) == 3
    assert linears[0].in_features == 16 + feature_dim(ALL_FEATURES) == m.config.input_dim
    assert [x.out_features for x in linears] == [8, 4, 3]
    assert m(torch.randn(5, m.config.input_dim)).shape == (5, 3)
    assert tiny_model(features=()).config.input_dim == 16
    with pytest.raises(ValueError):
        RouterMLP(RouterConfig(routes=("chunk",), embed_dim=4, features=()))


def _toy(n=200, d=6, seed=0):
    """Two separable clusters; cluster 0 prefers route 0, cluster 1 route 1."""
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % 2
    x = torch.randn(n, d, generator=g) * 0.3 + (y[:, None] * 2.0 - 1.0)
    pref = torch.nn.functional.one_hot(y, 2).float() * 0.9 + 0.05
    return x, pref, y


@pytest.mark.parametrize("loss", ["reward", "ce"])
def test_gumbel_training_reduces_loss_on_separable_toy_set(loss):
    torch.manual_seed(0)
    x, pref, y = _toy()
    m = RouterMLP(RouterConfig(routes=ROUTES, embed_dim=6, features=(), hidden=(16, 8), dropout=0.0))
    opt = torch.optim.Adam(m.parameters(), lr=0.02)

    def expected_loss() -> float:  # the noise-free objective: -(softmax . pref)
        with torch.no_grad():
            return float(-(torch.softmax(m(x), -1) * pref).sum(-1).mean())

    before = expected_loss()
    for step in range(60):
        m.train()
        opt.zero_grad()
        gumbel_routing_loss(m(x), pref, tau=anneal_tau(step, 60, 1.0, 0.2), loss=loss).backward()
        opt.step()
    after = expected_loss()
    assert after < before - 0.2
    assert (m.predict_proba(x).argmax(1) == y.numpy()).mean() > 0.95


def test_gumbel_head_is_straight_through_hard():
    pref = torch.tensor([[0.6, 0.3, 0.1]])
    for seed in range(5):
        torch.manual_seed(seed)
        logits = torch.randn(1, 3, requires_grad=True)
        loss = gumbel_routing_loss(logits, pref, 0.5, ce_weight=0.0)
        # forward: the hard one-hot route, so the loss is minus one route's preference exactly
        assert min(abs(loss.item() + p) for p in (0.6, 0.3, 0.1)) < 1e-6
        loss.backward()
        # backward: the soft sample's gradient reaches the logits through the hard choice
        assert logits.grad.abs().sum() > 1e-6
    assert anneal_tau(0, 10, 1.0, 0.1) == 1.0 and abs(anneal_tau(9, 10, 1.0, 0.1) - 0.1) < 1e-9


def test_inference_is_deterministic_eval_mode_no_noise():
    m = tiny_model(dropout=0.5)
    m.train()
    x = np.random.default_rng(0).normal(size=(7, m.config.input_dim)).astype(np.float32)
    p1, p2 = m.predict_proba(x), m.predict_proba(x)
    assert not m.training
    np.testing.assert_array_equal(p1, p2)
    with torch.no_grad():
        np.testing.assert_allclose(p1, torch.softmax(m(torch.from_numpy(x)), -1).numpy(), rtol=1e-6)
    np.testing.assert_allclose(p1.sum(1), 1.0, rtol=1e-5)
    router = Router(m, {"embedder": {"id": "tiny-bow", "dim": 16}}, tiny_embedder())
    qs = ["Who directed Inception?", "Which is older, the Nile or the Amazon?"]
    a, b = router.probs(qs), router.probs(qs)
    assert a == b and list(a[0]) == list(ROUTES)
    d = router.decide(qs[0])
    assert d.route == max(d.probs, key=d.probs.get) and d.policy == "argmax"


# ---------------------------------------------------------------- policy / calibration


def test_calibration_hits_target_share():
    p = np.random.default_rng(1).beta(2, 5, size=1000)
    for share in (0.1, 0.3, 0.5):
        t = calibrate_share(p, share)
        assert abs(achieved_share(p, t) - share) <= 0.002
    assert achieved_share(p, calibrate_share(p, 0.0)) == 0.0
    assert achieved_share(p, calibrate_share(p, 1.0)) == 1.0
    assert share_for_budget(1000, {"chunk": 500, "logic": 1500}) == pytest.approx(0.5)
    assert share_for_budget(100, {"chunk": 500, "logic": 1500}) == 0.0


def test_decide_threshold_and_policy_file(tmp_path):
    probs = {"chunk": 0.5, "summary": 0.2, "logic": 0.3}
    assert decide(probs) == "chunk"
    pol = Policy(kind="threshold", route="logic", threshold=0.25, target_share=0.3)
    assert decide(probs, pol) == "logic"
    assert decide(probs, Policy(kind="threshold", threshold=0.35)) == "chunk"
    pol.save(tmp_path / "t.json")
    assert Policy.load(tmp_path / "t.json") == pol


# ---------------------------------------------------------------- checkpoints


def test_checkpoint_save_load_and_embedder_mismatch(tmp_path):
    m = tiny_model()
    m.set_normalization(np.random.default_rng(0).normal(size=(20, m.config.input_dim)))
    path = tmp_path / "r.ckpt"
    card = save_checkpoint(path, m, {"embedder": {"id": "tiny-bow", "dim": 16}, "training": {"n_rows": 3}})
    assert (tmp_path / "r.card.json").is_file()
    assert json.loads((tmp_path / "r.card.json").read_text())["routes"] == list(ROUTES)
    assert path.read_bytes()[8:9] == b"{"  # safetensors: a JSON header, not a pickle
    assert read_card(path)["training"] == {"n_rows": 3} and card["format"] == read_card(path)["format"]

    m2, card2 = load_checkpoint(path)
    x = np.random.default_rng(2).normal(size=(3, m.config.input_dim)).astype(np.float32)
    np.testing.assert_array_equal(m.predict_proba(x), m2.predict_proba(x))
    assert card2["config"]["hidden"] == [8, 4]

    r = load_router(path, embedder=tiny_embedder())
    assert r.routes == ROUTES
    with pytest.raises(CheckpointError) as e:
        load_router(path, embedder=tiny_embedder(id="other-model"))
    assert "tiny-bow" in str(e.value) and "other-model" in str(e.value)
    with pytest.raises(CheckpointError, match="dim"):
        load_router(path, embedder=tiny_embedder(dim=32))
    with pytest.raises(CheckpointError, match="not found"):
        load_router(tmp_path / "missing.ckpt", embedder=tiny_embedder())
    (tmp_path / "junk.ckpt").write_bytes(b"\x80\x04not a checkpoint")
    with pytest.raises(CheckpointError):
        load_checkpoint(tmp_path / "junk.ckpt")


def test_default_checkpoint_is_the_shipped_generalist():
    from engine.routes import ROUTES as REGISTRY

    assert DEFAULT_CHECKPOINT.name == "generalist.ckpt" and DEFAULT_CHECKPOINT.parent.name == "checkpoints"
    assert DEFAULT_CHECKPOINT.is_file(), f"the shipped router is missing: {DEFAULT_CHECKPOINT}"
    assert DEFAULT_CHECKPOINT.stat().st_size < 2_000_000
    card = read_card(DEFAULT_CHECKPOINT)
    assert card["kind"] == "generalist" and "heldout" in card
    assert card["embedder"] == {"id": "all-MiniLM-L6-v2", "dim": 384}
    model, _ = load_checkpoint(DEFAULT_CHECKPOINT)
    assert model.config.routes == REGISTRY and model.config.input_dim == 384 + feature_dim(model.config.features)
    x = np.random.default_rng(0).normal(size=(2, model.config.input_dim)).astype(np.float32)
    np.testing.assert_allclose(model.predict_proba(x).sum(1), 1.0, rtol=1e-5)


@pytest.mark.embedder
def test_shipped_router_gives_multi_hop_questions_more_logic():
    from tests.engine.test_embedder import shared_test_embedder
    from tests.router.handwritten_questions import MULTI_HOP, ONE_HOP

    router = load_router(embedder=shared_test_embedder())  # the default: the shipped checkpoint
    logic = router.routes.index("logic")
    one_hop, multi_hop = router.probs_array(ONE_HOP), router.probs_array(MULTI_HOP)
    np.testing.assert_allclose(one_hop.sum(1), 1.0, rtol=1e-5)
    assert multi_hop[:, logic].mean() > one_hop[:, logic].mean()


# ---------------------------------------------------------------- CLI on tiny data

SINGLE = [
    ("Who wrote the novel Emma?", "Jane Austen", "Emma", "Emma is a novel written by Jane Austen."),
    ("What is the capital of Peru?", "Lima", "Peru", "Lima is the capital of Peru."),
    ("Where is the Eiffel Tower?", "Paris", "Eiffel Tower", "The Eiffel Tower stands in Paris."),
    ("When did the Titanic sink?", "1912", "Titanic", "The Titanic sank in 1912."),
]
MULTI = [
    (
        "Who was born first, Alan Turing or Ada Lovelace?",
        "Ada Lovelace",
        [("Alan Turing", "Alan Turing was born in 1912."), ("Ada Lovelace", "Ada Lovelace was born in 1815.")],
    ),
    (
        "Which river is longer, the Nile or the Danube?",
        "Nile",
        [("Nile", "The Nile is 6650 km long."), ("Danube", "The Danube is 2850 km long.")],
    ),
    (
        "What country is the director of Amelie from?",
        "France",
        [
            ("Amelie", "Amelie is a film directed by Jean-Pierre Jeunet."),
            ("Jean-Pierre Jeunet", "Jean-Pierre Jeunet is a French film director."),
        ],
    ),
]


@pytest.fixture
def tiny_data(tmp_path):
    rows = []
    for i in range(3):  # repeat so every stratum has a few rows
        for j, (q, a, t, txt) in enumerate(SINGLE):
            rows.append(
                {
                    "id": f"s{i}{j}",
                    "question": q if i == 0 else f"{q} ({i})",
                    "answers": [a],
                    "passages": [{"title": t, "text": txt, "supporting": True}],
                }
            )
        for j, (q, a, ps) in enumerate(MULTI):
            rows.append(
                {
                    "id": f"m{i}{j}",
                    "question": q if i == 0 else f"{q} ({i})",
                    "answers": [a],
                    "passages": [{"title": t, "text": x, "supporting": True} for t, x in ps],
                }
            )
    path = tmp_path / "tiny.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_cli_label_train_route_calibrate_eval(tmp_path, tiny_data):
    from engine.cli import route
    from training.cmd_eval import calibrate, eval_router
    from training.cmd_label import label
    from training.cmd_train import train

    assert set(train.commands) == {"generalist", "specialist"}
    emb = tiny_embedder()
    run = CliRunner()
    obj = {"embedder": emb}

    def ok(cmd, args):
        res = run.invoke(cmd, [str(a) for a in args], obj=obj, catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res

    labels = tmp_path / "labels.jsonl"
    ok(
        label,
        [
            tiny_data,
            "--kb",
            tmp_path / "kb",
            "--out",
            labels,
            "--scorer",
            "retrieval",
            "--routes",
            "chunk,logic",
            "--k",
            "1",
            "--build-kb",
        ],
    )
    rows = [json.loads(line) for line in labels.read_text().splitlines()]
    assert len(rows) == 21 and set(rows[0]["scores"]) == {"chunk", "logic"}
    # resumed: nothing new
    res = ok(
        label,
        [
            tiny_data,
            "--kb",
            tmp_path / "kb",
            "--out",
            labels,
            "--scorer",
            "retrieval",
            "--routes",
            "chunk,logic",
            "--k",
            "1",
        ],
    )
    assert "0 rows written, 21 already there" in res.output
    assert len(labels.read_text().splitlines()) == 21

    ckpt = tmp_path / "g.ckpt"
    ok(
        train,
        ["generalist", "--labels", labels, "--out", ckpt, "--epochs", "4", "--hidden", "8,4", "--eval-labels", labels],
    )
    card = read_card(ckpt)
    assert card["routes"] == ["chunk", "logic"] and card["embedder"]["id"] == "tiny-bow"
    assert card["training"]["label_files"][0]["rows"] == 21
    assert "logreg" in card["heldout"]["baselines"]

    res = ok(route, ["Who wrote the novel Emma?", "--checkpoint", ckpt, "--json"])
    out = json.loads(res.output)
    assert out["route"] in ("chunk", "logic") and abs(sum(out["probs"].values()) - 1) < 1e-5
    again = json.loads(ok(route, ["Who wrote the novel Emma?", "--checkpoint", ckpt, "--json"]).output)
    assert again["probs"] == out["probs"]  # deterministic across loads
    assert "route:" in ok(route, ["Who wrote the novel Emma?", "--checkpoint", ckpt]).output

    qfile = tmp_path / "qs.txt"
    qfile.write_text("\n".join(r["question"] for r in rows) + "\n")
    th = tmp_path / "th.json"
    ok(calibrate, [qfile, "--checkpoint", ckpt, "--logic-share", "0.3", "--out", th])
    pol = json.loads(th.read_text())
    assert pol["kind"] == "threshold" and abs(pol["meta"]["achieved_share"] - 0.3) < 0.1
    ok(calibrate, [labels, "--checkpoint", ckpt, "--token-budget", "900", "--out", tmp_path / "tb.json"])
    res = ok(route, ["Who wrote the novel Emma?", "--checkpoint", ckpt, "--thresholds", th, "--json"])
    assert json.loads(res.output)["policy"].startswith("threshold")

    rep = tmp_path / "rep.json"
    res = ok(eval_router, ["--checkpoint", ckpt, "--labels", labels, "--latency-n", "3", "--json", rep])
    assert "macro-F1" in res.output
    report = json.loads(rep.read_text())
    assert report["splits"]["overall"]["router"]["n"] == 21
    assert report["speed"]["batch_questions"] == 21  # every held-out question went through the batch timing

    spec = tmp_path / "s.ckpt"
    res = ok(train, ["specialist", "--from", ckpt, "--labels", labels, "--out", spec, "--epochs", "2"])
    scard = read_card(spec)
    assert scard["kind"] == "specialist" and set(scard["heldout"]["target"]) >= {"generalist", "specialist"}
    assert "specialist" in res.output


def test_cli_errors_are_clean(tmp_path, tiny_data):
    from engine.cli import main

    run = CliRunner()
    res = run.invoke(
        main, ["route", "Who?", "--checkpoint", str(tmp_path / "nope.ckpt")], obj={"embedder": tiny_embedder()}
    )
    assert res.exit_code == 2 and "not found" in res.output
    res = run.invoke(
        main,
        [
            "label",
            str(tiny_data),
            "--kb",
            str(tmp_path / "nokb"),
            "--out",
            str(tmp_path / "l.jsonl"),
            "--scorer",
            "retrieval",
            "--routes",
            "chunk,logic",
        ],
        obj={"embedder": tiny_embedder()},
    )
    assert res.exit_code == 2 and "--build-kb" in res.output


def test_training_is_seeded_and_deterministic(tmp_path):
    from hierarchy.datasets import Question
    from training.label_scorers import LabelConfig
    from training.labels import make_row

    cfg = LabelConfig(scorer="retrieval", routes=ROUTES)
    costs = {"chunk": {"tokens_est": 540}, "logic": {"tokens_est": 1780}}
    rows = []
    for i in range(24):
        multi = i % 2 == 1
        text = f"Who was born first, person {i} or person {i + 1}?" if multi else f"What is the capital of land {i}?"
        qq = Question(id=f"q{i}", text=text, answers=["x"], type=None, supporting=[], dataset="toy")
        rows.append(make_row(qq, {"chunk": 0.5 if multi else 1.0, "logic": 1.0}, costs, cfg, index=i))
    path = tmp_path / "l.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    from training.fit import TrainConfig
    from training.train import train_generalist

    tc = TrainConfig(hidden=(8, 4), max_epochs=3, batch_size=8)
    probs = []
    for name in ("a.ckpt", "b.ckpt"):
        train_generalist([path], tmp_path / name, tc, embedder=tiny_embedder())
        r = load_router(tmp_path / name, embedder=tiny_embedder())
        probs.append(r.probs_array([row["question"] for row in rows]))
    np.testing.assert_array_equal(probs[0], probs[1])


def test_llm_as_router_baseline_is_scored_and_timed():
    from tests.fakes import ScriptedLLM
    from training.eval_router import llm_route_baseline

    rows = [
        {
            "question": "Who wrote Emma?",
            "oracle": "chunk",
            "pref": {"chunk": 0.9, "logic": 0.1},
            "scores": {"chunk": 1.0, "logic": 1.0},
            "costs": {"chunk": {"tokens_est": 540}, "logic": {"tokens_est": 1780}},
            "dataset": "toy",
        },
        {
            "question": "Who was born first, A or B?",
            "oracle": "logic",
            "pref": {"chunk": 0.2, "logic": 0.8},
            "scores": {"chunk": 0.5, "logic": 1.0},
            "costs": {"chunk": {"tokens_est": 540}, "logic": {"tokens_est": 1780}},
            "dataset": "toy",
        },
    ]
    llm = ScriptedLLM(
        replies=[{"route": "summary"}],  # the retry after the invalid pick: invalid again
        rules={"born first": {"route": "logic"}, "Emma": {"route": "summary"}},
        delay=0.02,
    )  # summary: not allowed
    m = llm_route_baseline(llm, rows, ROUTES)
    assert m["n"] == 2 and m["failed"] == 1 and m["accuracy"] == 1.0  # the failed pick falls back to chunk
    assert m["seconds_median"] >= 0.02 and m["llm"] == "fake:scripted"  # timed around the LLM call
    # three calls (the failed pick and its retry, then the valid one), every token booked
    assert len(llm.completions) == 3 and m["tokens_per_decision"] == pytest.approx(
        sum(llm.reported_tokens) / 2, abs=0.05
    )


def test_masked_text_keeps_the_form_and_drops_the_topic():
    from router.features import embedded_text, mask_entities

    assert mask_entities("Who was born first, Ann Lee or Tom Ford?") == "Who was born first, X or X?"
    assert mask_entities('When did "The Wall" come out in 1979?') == "When did X come out in N?"
    assert mask_entities("Which river flows through Budapest?") == "Which river flows through X?"
    assert embedded_text("  Who wrote  Hamlet? ", "question") == "Who wrote Hamlet?"
    with pytest.raises(ValueError):
        embedded_text("Who?", "upper")


def test_structural_features_mark_joins_and_nested_relations():
    names = ("chain", "relative", "pair")
    lookup, nested, joined, relative = cheap_features(
        [
            "Which river flows through Budapest?",
            "What is the nationality of the director of the film Amélie?",
            "Who is older, the founder of Patagonia or the founder of Nike?",
            "What is the capital of the country where the Danube ends?",
        ],
        names,
    )
    assert lookup.tolist() == [0.0, 0.0, 0.0]
    assert nested[0] >= 2 / 3 and joined[2] == 1.0 and relative[1] == 1.0
