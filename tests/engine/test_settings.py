"""Settings fingerprints: results made under other settings are never reused, and adding a switch
that is off (its neutral value) does not throw away the answers already stored."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from engine.base.settings import Settings
from engine.routes.logic.config import LogicConfig

STORE = Path(__file__).resolve().parents[2] / "docs/results/bench_mixed100/results.jsonl"


@dataclass
class Before(Settings):
    k: int = field(default=3, metadata={"help": "chunks"})


@dataclass
class After(Settings):
    k: int = field(default=3, metadata={"help": "chunks"})
    new_switch: bool = field(default=False, metadata={"help": "a later cut", "neutral": False})


def test_a_switch_at_its_neutral_value_leaves_the_fingerprint_as_before_it_existed():
    assert After().fingerprint() == Before().fingerprint()
    assert After(new_switch=True).fingerprint() != Before().fingerprint()
    assert After(k=4).fingerprint() == Before(k=4).fingerprint() != Before().fingerprint()


def test_the_committed_routing_benchmark_answers_match_todays_logic_defaults():
    """docs/results/bench_mixed100 judges a new router without answering again (`benchmark
    --checkpoint`) only while its logic answers carry today's LogicConfig fingerprint."""
    stored = {
        json.loads(line)["sig"].get("logic_cfg")
        for line in STORE.read_text().splitlines()
        if json.loads(line).get("system") == "logic" and json.loads(line).get("kind") == "answer"
    }
    assert stored == {LogicConfig().fingerprint()}
    assert LogicConfig(plan_examples=2).fingerprint() != LogicConfig().fingerprint()
    assert LogicConfig(reflect_unknown_only=True).fingerprint() != LogicConfig().fingerprint()
