"""`bench specialist`: the set's rows are split by question id before anything else, the same way
on every run and as the file grows; the fine-tuning settings are chosen on the training rows
alone, before a held-out question is read; the paired interval is the bootstrap's on a known case;
and the report is written whole, the same on a rerun."""

from __future__ import annotations

import json

import pytest

import training.adapt.bench_specialist as bench_mod
from tests.samples import TOPICS
from tests.training.adapt_setup import ROUTES, embedder, small_generalist
from training.adapt.bench_specialist import SELECTION, bench_specialist
from training.adapt.specialist_fit import Variant, grid, targets
from training.adapt.specialist_split import paired_bootstrap, split_rows, validation_folds

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

COSTS = {"chunk": {"tokens": 500, "llm_calls": 1}, "summary": {"tokens": 600, "llm_calls": 1}}
COSTS["logic"] = {"tokens": 2000, "llm_calls": 4}
TINY = [Variant(epochs=2, lr=1e-3, all_zero="drop"), Variant(epochs=3, lr=1e-3, all_zero="uniform")]


def row(i: int, scores: dict | None = None, dataset: str = "toyset") -> dict:
    """A label row as `logicroute label --scorer answer` writes it (training.labels.labels.make_row)."""
    from hierarchy.datasets import Question
    from training.labels.label_scorers import LabelConfig
    from training.labels.labels import make_row

    # two question forms: logic answers the "before" chains, chunk the lookups
    chain = i % 2 == 0
    text = f"Which volcano erupted before the bridge number {i} was built?" if chain else f"Who owns bank {i}?"
    scores = scores or (
        {"chunk": 0.0, "summary": 0.0, "logic": 1.0} if chain else {"chunk": 1.0, "summary": 0.5, "logic": 1.0}
    )
    cfg = LabelConfig(scorer="answer", routes=ROUTES, llm="fake")
    return make_row(Question(f"q{i}", text, ["x"], None, [], dataset), scores, COSTS, cfg, index=i)


def test_the_split_is_by_question_id_deterministic_disjoint_and_stable_as_the_file_grows():
    rows = [row(i) for i in range(60)]
    train, held = split_rows(rows, 1 / 3)
    assert split_rows(rows, 1 / 3) == (train, held)
    assert {r["id"] for r in train} | {r["id"] for r in held} == {r["id"] for r in rows}
    assert not {r["id"] for r in train} & {r["id"] for r in held}
    assert 10 <= len(held) <= 30  # about a third
    # reordered, or grown by appended rows: every question keeps its side
    _, reversed_held = split_rows(rows[::-1], 1 / 3)
    assert {r["id"] for r in reversed_held} == {r["id"] for r in held}
    _, grown_held = split_rows(rows + [row(i) for i in range(60, 200)], 1 / 3)
    assert {r["id"] for r in held} <= {r["id"] for r in grown_held}
    assert not {r["id"] for r in train} & {r["id"] for r in grown_held}


def test_a_question_the_generalist_trained_on_is_never_held_out():
    rows = [row(i) for i in range(60)]
    _, held = split_rows(rows, 1 / 3)
    seen = {f"toyset:{r['id']}" for r in held[:3]}
    train, held_now = split_rows(rows, 1 / 3, seen)
    assert {f"toyset:{r['id']}" for r in train} >= seen
    assert [r["id"] for r in held_now] == [r["id"] for r in held[3:]]  # the others keep their side


def test_a_question_twice_in_the_rows_is_refused():
    with pytest.raises(ValueError, match="toyset:q3 appears twice"):
        split_rows([row(3), row(4), row(3)], 1 / 3)


def test_the_validation_folds_cover_the_training_rows_once_each():
    rows = [row(i) for i in range(40)]
    folds = validation_folds(rows, 3)
    assert sorted(i for f in folds for i in f) == list(range(40))
    assert all(folds) and folds == validation_folds(rows, 3)


def test_the_paired_interval_on_a_known_case():
    # the same gain on every question: no spread, the interval is that gain
    same = paired_bootstrap([0.5] * 10, [0.25] * 10)
    assert same["mean_diff"] == 25.0 and same["ci95"] == [25.0, 25.0] and same["half_width"] == 0.0
    assert same["above_zero"] and (same["wins"], same["losses"], same["ties"]) == (10, 0, 0)
    # two questions, one won by a whole point: a resample's mean is 0, 50 or 100 (1/4, 1/2, 1/4),
    # so the 2.5 and 97.5 percentiles are 0 and 100, and 0 is inside
    two = paired_bootstrap([1.0, 0.0], [0.0, 0.0], resamples=20_000, seed=3)
    assert two["mean_diff"] == 50.0 and two["ci95"] == [0.0, 100.0] and two["half_width"] == 50.0
    assert not two["above_zero"] and (two["wins"], two["losses"], two["ties"]) == (1, 0, 1)
    assert paired_bootstrap([1.0, 0.0], [0.0, 0.0], resamples=20_000, seed=3) == two  # fixed seed: same figures


def test_rows_where_no_route_scored_are_dropped_kept_or_made_uniform_as_the_variant_says():
    rows = [row(0), row(1, {"chunk": 0.0, "summary": 0.0, "logic": 0.0})]
    uniform = targets(rows, ROUTES, Variant(1, 1e-3, "uniform"), None)
    assert uniform[1].tolist() == pytest.approx([1 / 3] * 3) and uniform[0].argmax() == ROUTES.index("logic")
    cheapest = targets(rows, ROUTES, Variant(1, 1e-3, "cheapest"), None)
    assert cheapest[1].tolist() == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="all-zero treatment"):
        grid([1], [1e-3], ["zero"])


@pytest.fixture(scope="module")
def generalist(tmp_path_factory):
    return small_generalist(tmp_path_factory.mktemp("gen") / "generalist.ckpt")


def _labels(tmp_path, rows) -> str:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


LABELS = ("scores", "costs", "pref", "oracle", "all_zero", "answers_pred")


class SpyRow(dict):
    """A label row that records every read of its labels (its question text and id are free)."""

    reads: list[str] = []

    def _seen(self, key):
        if key in LABELS:
            SpyRow.reads.append(self["id"])

    def __getitem__(self, key):
        self._seen(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._seen(key)
        return super().get(key, default)

    def __iter__(self):  # a copy ({**row}) then goes through __getitem__
        return iter(list(self.keys()))


def test_the_choice_is_made_before_a_held_out_label_is_read_and_does_not_depend_on_them(
    tmp_path, generalist, monkeypatch
):
    rows = [row(i) for i in range(36)]
    _, held = split_rows(rows, 0.5)  # the bench's default share; no question here is the generalist's
    held_ids = {r["id"] for r in held}
    reads_at_choice = []
    load, write = bench_mod._load, bench_mod.atomic_write_json

    def spy_write(path, obj, **kw):
        if path.name == SELECTION:
            reads_at_choice.append(list(SpyRow.reads))
        return write(path, obj, **kw)

    SpyRow.reads = []
    monkeypatch.setattr(bench_mod, "_load", lambda *a: [SpyRow(r) for r in load(*a)])
    monkeypatch.setattr(bench_mod, "atomic_write_json", spy_write)
    res = bench_specialist(
        _labels(tmp_path, rows),
        "toyset",
        tmp_path / "a",
        TINY,
        checkpoint=generalist,
        other_labels=[],
        embedder=embedder(),
    )
    assert len(reads_at_choice) == 1 and reads_at_choice[0]  # the training rows' labels were read
    assert not held_ids & set(reads_at_choice[0])  # no held-out one's
    assert held_ids <= set(SpyRow.reads)  # read afterwards, to be judged
    assert res["split"]["held_out_ids"] == [r["id"] for r in held]

    # the held-out rows' labels turned upside down: the same choice, to the byte
    flipped = [{**r, "scores": {k: 1.0 - v for k, v in r["scores"].items()}} if r in held else r for r in rows]
    monkeypatch.setattr(bench_mod, "_load", load)
    other = tmp_path / "b"
    bench_specialist(
        _labels(tmp_path, flipped), "toyset", other, TINY, checkpoint=generalist, other_labels=[], embedder=embedder()
    )
    assert (other / SELECTION).read_bytes() == (tmp_path / "a" / SELECTION).read_bytes()


def test_the_report_names_every_system_and_a_rerun_writes_the_same_files(tmp_path, generalist):
    # four of the generalist's own training questions (tests.training.adapt_setup.small_generalist)
    own = [{**row(100 + i), "question": f"Which {t} {TOPICS[t]} holds item {100 + i}?"} for i, t in enumerate(TOPICS)]
    labels = _labels(tmp_path, [row(i) for i in range(36)] + own[:4])
    kw = dict(checkpoint=generalist, other_labels=[], embedder=embedder())
    res = bench_specialist(labels, "toyset", tmp_path / "a", TINY, **kw)
    assert list(res["held_out"]) == [
        "generalist (Decider)",
        "specialist (Decider)",
        "generalist MLP argmax",
        "specialist MLP argmax",
        "always chunk",
        "always summary",
        "always logic",
        "oracle",
    ]
    assert res["held_out"]["oracle"]["score"] >= max(m["score"] for m in res["held_out"].values())
    assert res["paired"]["decider"]["n"] == res["split"]["n_held_out"]
    assert res["split"]["n_seen_by_generalist"] == 4  # they only train
    assert not {r["id"] for r in own[:4]} & set(res["split"]["held_out_ids"])
    report = (tmp_path / "a" / "report.md").read_text()
    assert "half-width" in report and "## Verdict" in report
    bench_specialist(labels, "toyset", tmp_path / "b", TINY, **kw)
    for name in ("report.md", "results.json", SELECTION):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_the_lodo_check_trains_each_other_sets_fold_with_the_generalists_recipe_and_judges_both(tmp_path, generalist):
    from training.adapt.specialist_lodo import lodo_check

    others = [row(i, dataset="alpha") for i in range(10)] + [row(i, dataset="beta") for i in range(10, 18)]
    files = [_labels(tmp_path, others)]
    target = [row(i) for i in range(12)]
    got = lodo_check(generalist, target, TINY[0], "toyset", embedder(), label_files=files)
    # one fold per other set, each judged on that set's rows by a generalist trained on the rest
    assert {d: v["n"] for d, v in got["sets"].items()} == {"alpha": 10, "beta": 8}
    for fold in got["sets"].values():
        assert fold["diff"] == round(fold["specialist"] - fold["generalist"], 1)
        assert fold["within_bar"] == (fold["diff"] >= -1.0)
    assert got["all_within_bar"] == all(v["within_bar"] for v in got["sets"].values())


def test_the_command_refuses_an_unknown_all_zero_treatment_before_reading_anything(tmp_path):
    from click.testing import CliRunner

    from training.adapt.cmd_bench_specialist import bench_specialist as command

    labels = _labels(tmp_path, [row(i) for i in range(3)])
    args = ["--labels", labels, "--set", "toyset", "--all-zero", "zero", "--out", str(tmp_path / "out")]
    res = CliRunner().invoke(command, args, usage_error_expected=True)
    assert res.exit_code == 2 and "all-zero treatment must be one of drop, cheapest, pref, uniform" in res.output
    assert not (tmp_path / "out").exists()
