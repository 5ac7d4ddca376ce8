"""The logic route's named settings: "paper" is LogicConfig's defaults, "lean" is the cost-cut
row that bench logic measured, "grounded" is paper with its answers tied to the passages read,
"lean-grounded" is lean with the same grounding rules, "auto" (the default) is lean-grounded for
short answers and grounded for the reader style; RoutedRAG picks
one for every logic answer (`ask --set logic_preset=NAME`: tests/engine/test_cli_ask.py)."""

from __future__ import annotations

from dataclasses import fields

import pytest

from engine.core.routes.logic.config import FIXED, LogicConfig, preset_config
from engine.floor.base.errors import LogicRouteError
from tests.fakes import ScriptedLLM, make_rag
from training.bench.bench_logic import BENCH_MAX_SECONDS, LEAN_UNKNOWN, system_config
from training.common.logic_experiment import LogicExperiment, experiment, logic_fingerprint


def test_paper_is_the_defaults_and_lean_is_the_measured_bench_logic_row():
    assert preset_config("paper", k=3) == LogicConfig(k=3)
    assert experiment("lean", k=3, max_seconds=BENCH_MAX_SECONDS) == system_config("logic-lean-forms-compressed")
    # what that row is: the reflect-unknown lean row with whole chunks, form plans, form evidence 100
    measured = {**LEAN_UNKNOWN, "evidence_tokens": 0, "plan_forms": True, "form_evidence_tokens": 100}
    assert experiment("paper", **measured) == experiment("lean")


@pytest.mark.parametrize("preset", ["paper", "lean", "grounded", "lean-grounded"])
def test_an_experiment_that_changes_no_mechanism_is_its_preset_to_the_fingerprint(preset):
    assert LogicExperiment().mechanisms() == FIXED and experiment(preset).mechanisms() == FIXED
    assert logic_fingerprint(experiment(preset, k=5)) == logic_fingerprint(preset_config(preset, k=5))
    assert logic_fingerprint(experiment(preset, reflection=False)) != logic_fingerprint(preset_config(preset))
    assert experiment(preset, reflection=False).mechanisms().reflection is False


def test_an_unknown_preset_is_refused():
    with pytest.raises(ValueError, match="unknown logic preset 'fast'"):
        preset_config("fast")
    with pytest.raises(LogicRouteError, match="unknown logic preset"):
        make_rag(ScriptedLLM(), logic_preset="fast")


@pytest.mark.parametrize("preset", ["paper", "lean", "grounded"])
def test_every_logic_answer_of_a_rag_uses_its_preset_under_the_budget(preset):
    cfg = make_rag(ScriptedLLM(), logic_preset=preset, k=4).logic_config()
    expected = preset_config(preset, k=4)
    assert all(getattr(cfg, f.name) == getattr(expected, f.name) for f in fields(LogicConfig))


@pytest.mark.parametrize(("grounded", "base"), [("grounded", "paper"), ("lean-grounded", "lean")])
def test_the_grounded_presets_are_their_base_with_answers_tied_to_the_passages_read(grounded, base):
    on, off = preset_config(grounded), preset_config(base)
    changed = {f.name for f in fields(LogicConfig) if getattr(on, f.name) != getattr(off, f.name)}
    assert changed == {"reshow_best", "keep_facts", "ground_retry", "cite_passages"}


@pytest.mark.parametrize(("style", "preset"), [("short", "lean-grounded"), ("reader", "lean-grounded")])
def test_by_default_both_answer_styles_get_the_lean_grounded_route(style, preset):
    cfg = make_rag(ScriptedLLM(), style=style, k=4).logic_config()
    assert cfg == preset_config(preset, k=4)
    assert make_rag(ScriptedLLM(), style=style, logic_preset="paper", k=4).logic_config() == LogicConfig(k=4)
