"""RagConfig: everything a user sets on RoutedRAG, in one documented object (docs/configuration.md
is its table). RoutedRAG is a RagConfig with a knowledge base and its parts, so the settings have
this one home. The commands read it from a TOML file (`--config FILE`) and `--set KEY=VALUE`
pairs; a library user passes it, or its fields, to RoutedRAG:

    config = RagConfig.load("logicroute.toml", sets=["k=5", "budget.max_seconds=60"])
    rag = RoutedRAG.open("kb/", config=config)          # or RoutedRAG.open("kb/", k=5, ...)

The file holds the fields below at the top level and the cost limits in a [budget] table
(engine.core.budget.Budget: max_llm_calls, max_prompt_tokens, max_seconds, and `thresholds`, the file
`logicroute calibrate` writes). The logic route's settings are chosen by name: a preset of
engine.core.routes.logic.config.PRESETS, or auto. Experiments (the benchmarks' ablations) are not
configured here: training/ builds them.

Only the standard library and light modules of ours at module level: the CLI imports this.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from engine.core.budget import Budget
from engine.core.escalation import RETRY_ROUTES, check_retry_routes
from engine.core.ood_policy import DEFAULT_OOD_POLICY, check_ood_policy
from engine.core.routes.logic.config import PRESET_CHOICES
from engine.floor.base.errors import ConfigError, LogicRouteError
from engine.floor.llm.base import DEFAULT_LLM
from engine.floor.prompts.answer import check_style

BUDGET_KEYS = ("max_llm_calls", "max_prompt_tokens", "max_seconds", "thresholds")


@dataclass(kw_only=True)
class RagConfig:
    """What a user chooses for RoutedRAG. Defaults are what `ask` does without options."""

    llm_spec: str = field(
        default=DEFAULT_LLM,
        metadata={"help": "the LLM: local:MODEL, openai:MODEL or openai:MODEL@BASE_URL (?timeout=S&retries=N)"},
    )
    checkpoint: str | None = field(
        default=None,
        metadata={"help": "router checkpoint; none: the KB's own (logicroute adapt), else the shipped one"},
    )
    k: int = field(default=3, metadata={"help": "passages per retrieval"})
    style: str = field(
        default="reader",
        metadata={"help": "reader: sentences citing passages [n] | short: the answer phrase (what EM/F1 score)"},
    )
    logic_preset: str = field(
        default="auto",
        metadata={
            "help": "the logic route's settings: paper | lean (cheaper) | grounded | lean-grounded "
            "(answers tied to the passages read) | auto (lean-grounded for short answers, grounded for reader)"
        },
    )
    retrieval: str | None = field(default=None, metadata={"help": "hybrid | dense | lexical; none: the KB's own"})
    cache: bool = field(default=True, metadata={"help": "the on-disk LLM call cache"})
    escalate: bool = field(
        default=False,
        metadata={"help": "check chunk/summary answers (self-check call or escalate_below) and retry failing ones"},
    )
    escalate_below: float | None = field(
        default=None,
        metadata={
            "help": "with escalate: a confidence below this goes to logic without a self-check call "
            "(none: the threshold logicroute adapt calibrated for the KB's router, if any)"
        },
    )
    self_check: bool = field(default=True, metadata={"help": "with escalate: ask the LLM if the passages answer"})
    retry_unanswered: bool = field(
        default=True, metadata={"help": "an answer that says it has none is answered again up retry_routes"}
    )
    retry_routes: tuple[str, ...] = field(
        default=RETRY_ROUTES, metadata={"help": "the retry's ladder, cheaper to costlier (e.g. logic alone)"}
    )
    keep_absence: bool = field(
        default=True,
        metadata={
            "help": "a cheap answer 'not in the documents' is final unless the retrieval evidence says a "
            "costlier route could find it (engine.core.absence; false: every such answer climbs retry_routes)"
        },
    )
    abstain_ungrounded: bool = field(
        default=True,
        metadata={
            "help": "an answer naming a number, flag or code word no passage read holds (or a logic answer "
            "built on a sub-answer no passage states) becomes 'not in the documents' (false: it is returned)"
        },
    )
    ood_kb_questions: bool = field(
        default=True,
        metadata={
            "help": "the out-of-distribution guard also knows questions made from the KB's headings and titles "
            "(no LLM call), so questions about your own documents keep the router's decision"
        },
    )
    list_gate: bool = field(
        default=True,
        metadata={
            "help": "the router's list gate sends a question asking for a list across the KB's documents to "
            "summary, whose global mode gathers it from many pages (false: the router's own choice)"
        },
    )
    ood_policy: str = field(
        default=DEFAULT_OOD_POLICY,
        metadata={"help": "a question unlike the router's training questions: chunk-escalate | chunk | logic | route"},
    )
    budget: Budget | None = field(
        default=None,
        metadata={"help": "cost limits per answer and the calibrated logic threshold ([budget] in a file)"},
    )

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or isinstance(self.k, bool) or self.k < 1:
            raise ConfigError(f"k must be a whole number >= 1, got {self.k!r}")
        if self.escalate_below is not None and not 0.0 < self.escalate_below <= 1.0:
            raise ConfigError(f"escalate_below is a probability in (0, 1], got {self.escalate_below}")
        if self.logic_preset not in PRESET_CHOICES:
            raise ConfigError(f"unknown logic preset {self.logic_preset!r}: one of {', '.join(PRESET_CHOICES)}")
        if self.retrieval is not None:
            from hierarchy.retrieval import check_mode

            check_mode(self.retrieval)
        check_style(self.style)
        check_ood_policy(self.ood_policy)
        self.retry_routes = check_retry_routes(self.retry_routes)

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata["help"] for f in fields(RagConfig)}

    def options(self) -> dict:
        """The settings as keyword arguments (RoutedRAG takes them by the same names)."""
        return {f.name: getattr(self, f.name) for f in fields(RagConfig)}

    @classmethod
    def load(
        cls, path: str | Path | None = None, sets: tuple[str, ...] | list[str] = (), base: dict | None = None
    ) -> "RagConfig":
        """`base` (the environment's defaults), the TOML file over it (none: the defaults), then
        each KEY=VALUE of `sets` (budget.KEY for a budget limit). Unknown keys and bad values
        fail in one line."""
        values: dict = dict(base or {})
        if path is not None:
            try:
                values |= tomllib.loads(Path(path).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
                raise ConfigError(f"cannot read the configuration {path}: {e}") from None
        budget = values.pop("budget", {})
        if not isinstance(budget, dict):
            raise ConfigError(f"{path}: budget is a table ([budget]) of {', '.join(BUDGET_KEYS)}")
        for pair in sets:
            key, eq, raw = pair.partition("=")
            key = key.strip()
            if not eq:
                raise ConfigError(f"--set {pair!r}: expected KEY=VALUE")
            if key.startswith("budget."):
                budget[key.removeprefix("budget.")] = _value(raw.strip())
            else:
                values[key] = _value(raw.strip())
        return cls.from_dict(values, budget, where=str(path) if path else "--set")

    @classmethod
    def from_dict(cls, values: dict, budget: dict | None = None, where: str = "the configuration") -> "RagConfig":
        names = [f.name for f in fields(RagConfig) if f.name != "budget"]
        unknown = sorted(set(values) - set(names)) + sorted(f"budget.{k}" for k in set(budget or {}) - set(BUDGET_KEYS))
        if unknown:
            raise ConfigError(
                f"{where}: unknown setting(s) {', '.join(unknown)}; known: {', '.join(names)}, "
                f"budget.{', budget.'.join(BUDGET_KEYS)}"
            )
        kwargs = dict(values)
        if isinstance(kwargs.get("retry_routes"), str):
            kwargs["retry_routes"] = [r.strip() for r in kwargs["retry_routes"].split(",") if r.strip()]
        if "retry_routes" in kwargs:
            kwargs["retry_routes"] = tuple(kwargs["retry_routes"])
        try:
            config = cls(**kwargs)
            return replace(config, budget=_budget(dict(budget or {}))) if budget else config
        except (LogicRouteError, TypeError, ValueError) as e:
            raise ConfigError(f"{where}: {e}") from None


def thresholds_budget(path: str | Path, **limits) -> Budget:
    """The Budget of the thresholds.json that `logicroute calibrate` writes, with `limits`."""
    from router.policy import Policy

    return Budget.from_policy(Policy.load(path), **limits)


def _budget(values: dict) -> Budget | None:
    thresholds = values.pop("thresholds", None)
    if thresholds:
        return thresholds_budget(thresholds, **values)
    return Budget(**values) if values else None


def _value(raw: str):
    """A --set value as TOML reads it (5, 0.5, true, "text"), else the bare text; none = unset."""
    if raw.lower() == "none":
        return None
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw
