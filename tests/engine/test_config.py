"""RagConfig: every RoutedRAG setting in one documented object, read from a TOML file and
--set pairs, the cost limits in its [budget] table; `ask` takes it instead of one option each."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from engine.core.budget import Budget
from engine.core.config import BUDGET_KEYS, RagConfig
from engine.core.pipeline import RoutedRAG
from engine.floor.base.errors import ConfigError
from router.policy import Policy

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def test_a_file_then_set_pairs_make_one_config_with_the_limits_in_its_budget(tmp_path):
    path = tmp_path / "logicroute.toml"
    path.write_text('k = 5\nlogic_preset = "lean"\nretry_routes = ["logic"]\n[budget]\nmax_llm_calls = 6\n')
    config = RagConfig.load(path, ["logic_preset=paper", "budget.max_seconds=30", "escalate=true"])
    assert (config.k, config.logic_preset, config.retry_routes, config.escalate) == (5, "paper", ("logic",), True)
    assert config.budget == Budget(max_llm_calls=6, max_seconds=30)
    assert RagConfig.load() == RagConfig() and RagConfig().budget is None


def test_the_thresholds_file_of_calibrate_becomes_the_budgets_threshold(tmp_path):
    Policy(kind="threshold", route="logic", threshold=0.4, target_share=0.25).save(tmp_path / "t.json")
    config = RagConfig.load(sets=[f"budget.thresholds={tmp_path / 't.json'}", "budget.max_llm_calls=4"])
    assert config.budget == Budget(threshold=0.4, logic_share=0.25, max_llm_calls=4)


def test_an_unknown_key_is_refused_naming_the_known_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"^--set: unknown setting\(s\) top_k; known: llm_spec, checkpoint, k,"):
        RagConfig.load(sets=["top_k=5"])
    path = tmp_path / "c.toml"
    path.write_text("[budget]\nmax_tokens = 5\n")
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) budget.max_tokens; .*budget.max_seconds"):
        RagConfig.load(path)


@pytest.mark.parametrize(
    "pair, says",
    [
        ("k=0", "k must be a whole number >= 1"),
        ("style=long", "unknown answer style 'long'"),
        ("logic_preset=fast", "unknown logic preset 'fast'"),
        ("retry_routes=logic,summary", "cheaper to costlier"),
        ("escalate_below=1.5", "escalate_below is a probability"),
        ("budget.max_llm_calls=0", "max_llm_calls must be a positive integer"),
        ("k", "expected KEY=VALUE"),
    ],
)
def test_a_bad_value_is_one_line_that_says_what_is_wrong(pair, says):
    with pytest.raises(ConfigError, match=re.escape(says)):
        RagConfig.load(sets=[pair])


def test_a_file_that_is_not_toml_is_one_line_naming_it(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("k = = 3\n")
    with pytest.raises(ConfigError, match=f"^cannot read the configuration {re.escape(str(path))}: "):
        RagConfig.load(path)


def test_routed_rag_is_a_config_with_a_knowledge_base_and_its_parts_so_a_setting_has_one_home():
    parts = {f.name for f in fields(RoutedRAG)} - {f.name for f in fields(RagConfig)}
    assert issubclass(RoutedRAG, RagConfig) and parts == {"kb", "llm", "llm_settings", "router", "summary_config"}


def test_every_setting_has_help_and_a_row_in_the_configuration_document():
    text = DOC.read_text()
    documented = set(re.findall(r"^\| `([a-z_.]+)` \|", text, flags=re.M))
    assert all(RagConfig.help().values())
    keys = {f.name for f in fields(RagConfig) if f.name != "budget"} | {f"budget.{k}" for k in BUDGET_KEYS}
    assert keys <= documented


def test_ask_keeps_to_fourteen_options():
    from engine.face.cli_ask import ask

    assert len([p for p in ask.params if p.param_type_name == "option"]) <= 14
