"""Leave-one-dataset-out: every data set is judged by a router that never saw it."""

from __future__ import annotations

import json

import pytest

from hierarchy.datasets import Question
from tests.fakes import HashedBowEmbedder
from training.fitting.fit import TrainConfig
from training.fitting.lodo import lodo_report
from training.fitting.lodo_format import format_lodo
from training.labels.label_scorers import LabelConfig
from training.labels.labels import make_row

TOPICS = {
    "films": ["Vertigo", "Psycho", "Alien", "Jaws", "Heat", "Ronin"],
    "rivers": ["Danube", "Rhine", "Volga", "Nile", "Amazon", "Mekong"],
    "painters": ["Monet", "Munch", "Goya", "Klimt", "Dali", "Titian"],
}


def _label_file(tmp_path, dataset: str, names: list[str]) -> str:
    """Comparisons ('X or Y?') are answered only by logic, lookups by chunk as well."""
    cfg = LabelConfig(scorer="answer", routes=("chunk", "logic"), llm="fake")
    lines = []
    for i, (a, b) in enumerate(zip(names, names[1:] + names[:1])):
        for kind, text in (("cmp", f"Which came first, {a} or {b}?"), ("one", f"Where is {a} from?")):
            q = Question(id=f"{kind}{i}", text=text, answers=["x"], type=kind, supporting=[], dataset=dataset)
            scores = {"chunk": 0.0, "logic": 1.0} if kind == "cmp" else {"chunk": 1.0, "logic": 1.0}
            costs = {"chunk": {"tokens": 700, "llm_calls": 1}, "logic": {"tokens": 3000, "llm_calls": 5}}
            lines.append(json.dumps(make_row(q, scores, costs, cfg, index=len(lines))))
    path = tmp_path / f"{dataset}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_each_set_is_judged_by_a_router_trained_on_the_others(tmp_path):
    files = [_label_file(tmp_path, d, names) for d, names in TOPICS.items()]
    cfg = TrainConfig(
        features=("comparison",), hidden=(16, 8), dropout=0.0, lr=0.05, max_epochs=30, patience=30, val_frac=0.2
    )
    rep = lodo_report(files, cfg, embedder=HashedBowEmbedder(dim=32), specialist_n=4)

    assert set(rep["held_out"]) == set(TOPICS)
    for table in rep["held_out"].values():
        assert table["router"]["n"] == 12
        assert table["always chunk"]["score"] == 50.0 and table["always logic"]["score"] == 100.0
        assert table["oracle"]["score"] == 100.0 and table["oracle"]["tokens"] == (6 * 700 + 6 * 3000) / 12
        # the comparison form carries over to an unseen topic
        assert table["logreg"]["score"] >= 80.0 and table["logreg"]["tokens"] < table["always logic"]["tokens"]
        assert sum(table["router"]["shares"].values()) == pytest.approx(1.0, abs=0.01)  # a decision per row
    assert rep["pooled"]["router"]["n"] == 36
    assert "### left out: films (12 questions)" in format_lodo(rep)
    spec = rep["specialist"]["films"]  # fine-tuned on 4 left-out rows, judged on the 8 after them
    assert spec["n_tune"] == 4 and spec["generalist"]["n"] == spec["specialist"]["n"] == 8
    assert spec["oracle"]["score"] == 100.0
    assert "### specialist on films: fine-tuned on 4, judged on the next 8" in format_lodo(rep)
    # logic wins exactly the comparisons, which the router's P(logic) can rank by their form
    ranking = rep["logic_gain_ranking"]
    assert set(ranking) == {*TOPICS, "pooled"} and ranking["pooled"]["logic_better"] == 18
    assert ranking["pooled"]["chunk_better"] == 0 and ranking["pooled"]["auc_p_logic"] > 0.5
    assert "AUC P(logic)" in format_lodo(rep)


def test_the_llm_as_router_is_judged_on_every_left_out_row_and_pays_for_its_call(tmp_path):
    from tests.fakes import ScriptedLLM

    files = [_label_file(tmp_path, d, names) for d, names in TOPICS.items()]
    # it picks logic for comparisons and chunk for lookups, except that it misreads one lookup
    llm = ScriptedLLM(
        rules={
            "Reply again": "still not json",
            "Where is Vertigo": "not json",
            "Which came first": {"route": "logic"},
            "Where is": {"route": "chunk"},
        }
    )
    cfg = TrainConfig(features=("comparison",), hidden=(8, 4), max_epochs=2, patience=2, val_frac=0.2)
    rep = lodo_report(files, cfg, embedder=HashedBowEmbedder(dim=16), llm=llm)

    films = rep["held_out"]["films"]["LLM router"]
    assert films["score"] == 100.0  # the misread lookup falls back to chunk, which answers it
    assert films["shares"] == {"chunk": 0.5, "logic": 0.5}
    assert films["tokens"] > rep["held_out"]["films"]["oracle"]["tokens"]  # the decision call is paid for
    assert films["llm_calls"] > rep["held_out"]["films"]["oracle"]["llm_calls"]
    assert rep["llm_router_errors"] == 1
    assert rep["pooled"]["LLM router"]["n"] == 36 and "| LLM router |" in format_lodo(rep)


def test_a_generalist_card_keeps_its_recipes_leave_one_dataset_out_figures(tmp_path):
    from click.testing import CliRunner

    from router.checkpoint import read_card
    from training.fitting.cmd_train import train

    files = [_label_file(tmp_path, d, names) for d, names in TOPICS.items()]
    out = tmp_path / "g.ckpt"
    args = ["generalist", "--labels", ",".join(files), "--out", str(out), "--lodo", "--features", "comparison"]
    args += ["--hidden", "8,4", "--epochs", "3", "--batch-size", "8"]
    res = CliRunner().invoke(train, args, obj={"embedder": HashedBowEmbedder(dim=16)}, catch_exceptions=False)
    assert res.exit_code == 0, res.output

    card = read_card(out)
    assert card["training"]["config"]["batch_size"] == 8
    assert set(card["lodo"]) == {*TOPICS, "pooled"}
    films = card["lodo"]["films"]
    assert {"router", "logreg", "always chunk", "always logic", "oracle"} <= set(films)
    assert films["always logic"]["score"] == 100.0 and card["lodo"]["pooled"]["router"]["n"] == 36
    assert "left out films: router" in res.output


def test_eval_router_lodo_retrains_every_fold_with_a_checkpoints_recorded_recipe(tmp_path):
    from click.testing import CliRunner

    from router.checkpoint import read_card
    from training.fitting.cmd_eval import eval_router
    from training.fitting.cmd_train import train
    from training.fitting.fit import config_from_card

    files = [_label_file(tmp_path, d, names) for d, names in TOPICS.items()]
    out, obj = tmp_path / "g.ckpt", {"embedder": HashedBowEmbedder(dim=16)}
    args = ["generalist", "--labels", ",".join(files), "--out", str(out), "--features", "comparison"]
    args += ["--hidden", "8,4", "--epochs", "3", "--batch-size", "8", "--all-zero", "drop"]
    args += ["--val-frac", "0", "--text-form", "plain", "--cost-weight", "0.3"]
    assert CliRunner().invoke(train, args, obj=obj, catch_exceptions=False).exit_code == 0
    recipe = config_from_card(out)
    assert recipe.cost_weight == 0.3
    assert recipe.hidden == (8, 4) and recipe.batch_size == 8 and recipe.all_zero == "drop"
    assert recipe.features == ("comparison",) and recipe.val_frac == 0.0 and recipe.text_form == "plain"
    assert read_card(out)["training"]["n_val"] == 0  # every answer row trained, for all 3 epochs

    report = tmp_path / "lodo.json"
    args = ["--lodo", "--labels", ",".join(files), "--recipe", str(out), "--json", str(report)]
    res = CliRunner().invoke(eval_router, args, obj=obj, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert json.loads(report.read_text())["config"]["batch_size"] == 8
    assert json.loads(report.read_text())["config"]["cost_weight"] == 0.3
    assert "### left out: films (12 questions)" in res.output


def test_seeds_retrain_every_fold_and_report_the_spread_of_the_routers_score(tmp_path):
    files = [_label_file(tmp_path, d, names) for d, names in TOPICS.items()]
    cfg = TrainConfig(features=("comparison",), hidden=(8, 4), max_epochs=3, batch_size=8)
    rep = lodo_report(files, cfg, embedder=HashedBowEmbedder(dim=16), seeds=[0, 1])

    spread = rep["seed_spread"]
    assert spread["seeds"] == [0, 1] and len(spread["pooled"]) == 2
    assert all(p["n"] == 36 for p in spread["pooled"])
    assert set(spread["held_out"]) == set(TOPICS) and all(len(v) == 2 for v in spread["held_out"].values())
    assert spread["min"] <= spread["mean"] <= spread["max"]
    assert spread["scores"] == [p["score"] for p in spread["pooled"]]
    assert "router over seeds 0, 1: pooled" in format_lodo(rep)


def test_seeds_must_be_whole_numbers():
    from click.testing import CliRunner

    from training.fitting.cmd_eval import eval_router

    res = CliRunner().invoke(
        eval_router, ["--lodo", "--labels", "x.jsonl", "--seeds", "0,one"], usage_error_expected=True
    )
    assert res.exit_code != 0 and "--seeds takes whole numbers" in res.output


def test_the_recipes_own_seed_is_judged_from_the_folds_already_trained(tmp_path, monkeypatch):
    import training.fitting.lodo as lodo

    files = [_label_file(tmp_path, d, names) for d, names in TOPICS.items()]
    cfg = TrainConfig(features=("comparison",), hidden=(8, 4), max_epochs=3, batch_size=8, seed=0)
    trained = []
    real = lodo.fit_router
    monkeypatch.setattr(lodo, "fit_router", lambda *a, **k: trained.append(a[3].seed) or real(*a, **k))
    rep = lodo_report(files, cfg, embedder=HashedBowEmbedder(dim=16), seeds=[0, 1])

    assert trained == [0, 0, 0, 1, 1, 1]  # three folds at the recipe's seed, three more at seed 1
    assert rep["seed_spread"]["pooled"][0]["score"] == rep["pooled"]["router"]["score"]
