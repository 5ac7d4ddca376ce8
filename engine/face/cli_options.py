"""What the `logicroute` commands share: the --llm option and its early check, the reading of a
--questions file, the objects tests inject through ctx.obj, and the -q/-v logging set up on the
main group.

Only click, the standard library and light modules of ours at module level: `logicroute --help`
stays instant.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import click

from engine.core.routes import ROUTE_CHOICES as ROUTE_CHOICES  # the --route choices, from the registry
from engine.floor.base.errors import LLMError, LogicRouteError
from engine.floor.llm.base import DEFAULT_LLM
from engine.floor.llm.urls import redact

LOGGER = "logicroute"
log = logging.getLogger("logicroute.cli")


def default_llm_spec() -> str:
    return os.environ.get("LOGICROUTE_LLM", DEFAULT_LLM)


LLM_HELP = "local:MODEL, openai:MODEL or openai:MODEL@BASE_URL; a remote one may end in ?timeout=SECONDS&retries=N"


def llm_option(f=None, *, help: str = LLM_HELP):
    """The --llm option of every command ($LOGICROUTE_LLM, else the local model). How long a
    remote endpoint is waited on is part of the spec (engine.floor.llm.base.parse_spec)."""
    spec = click.option("--llm", "llm_spec", default=default_llm_spec, show_default=DEFAULT_LLM, help=help)
    return spec(f) if f is not None else spec


def style_option(default: str):
    """The --style option: the answer style of engine.floor.prompts.answer. A `default` of "auto" (labels,
    benchmarks) adds that choice: reader for data with sentence answers (GraphRAG-Bench), else short."""
    from engine.floor.prompts.answer import ANSWER_STYLES

    auto = default == "auto"
    return click.option(
        "--style",
        type=click.Choice((("auto",) if auto else ()) + ANSWER_STYLES),
        default=default,
        show_default=True,
        help=("auto = reader for data with sentence answers (GraphRAG-Bench), else short; " if auto else "")
        + "short: the answer phrase | reader: sentences citing passages [n]",
    )


def config_options(f):
    """--config and --set: RoutedRAG's settings (engine.core.config.RagConfig) for `ask` and `serve`."""
    f = click.option(
        "--set",
        "sets",
        multiple=True,
        metavar="KEY=VALUE",
        help="one setting over --config (repeatable): k=5, logic_preset=lean, retrieval=dense, checkpoint=FILE, "
        "cache=false, retry_routes=logic, retry_unanswered=false, escalate_below=0.6, ood_policy=chunk, "
        "budget.max_seconds=60, budget.max_llm_calls=6, budget.thresholds=thresholds.json, ... "
        "(docs/configuration.md)",
    )(f)
    return click.option(
        "--config",
        "config_file",
        type=click.Path(exists=True, dir_okay=False),
        help="a TOML file of RoutedRAG's settings, its cost limits in a [budget] table (docs/configuration.md)",
    )(f)


def config_of(ctx: click.Context, options: dict):
    """The RagConfig of a command: $LOGICROUTE_LLM, then --config, then --set, then the --llm,
    --style and --escalate given on the command line. A bad key or value is a ConfigError (one line)."""
    from click.core import ParameterSource

    from engine.core.config import RagConfig

    base = {"llm_spec": os.environ["LOGICROUTE_LLM"]} if os.environ.get("LOGICROUTE_LLM") else {}
    sets = list(options.get("sets", ()))
    for name in ("llm_spec", "style"):
        if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE:
            sets.append(f"{name}={options[name]}")
    if options.get("escalate"):
        sets.append("escalate=true")
    return RagConfig.load(options.get("config_file"), sets, base=base)


def check_llm_spec(spec: str) -> None:
    """Fail at once on an LLM spec that cannot work, before any model loads: the spec parsed by
    engine.floor.llm.factory's parser, a local model name or .gguf file that does not exist, an
    openai: spec for the public endpoint without an API key. Loads and connects nothing."""
    from engine.floor.llm.factory import parse_spec

    s = parse_spec(spec)
    if s.backend == "local":
        if s.model.endswith(".gguf"):
            if not Path(s.model).expanduser().is_file():
                raise LLMError(f"local model file not found: {s.model}")
            return
        from engine.floor.llm.model_files import MODELS

        if s.model not in MODELS:
            raise LLMError(
                f"unknown local model {s.model!r}: known are {', '.join(MODELS)} (or give a path to a .gguf file)"
            )
        return
    keyed = os.environ.get("LOGICROUTE_API_KEY") or os.environ.get("OPENAI_API_KEY")
    if not keyed and not s.base_url:
        raise LLMError(f"no API key for {redact(spec)}: set LOGICROUTE_API_KEY or OPENAI_API_KEY")


def read_items(path: str | Path) -> list:
    """Every item of a questions file (hierarchy.question_files.QuestionItem), bad ones included,
    each question checked as an answer would check it (empty, overlong): `route --questions`
    and `ask --questions` read a file the same way."""
    from engine.core.routes.common import check_question
    from hierarchy.question_files import read_question_items

    items = read_question_items(path)
    for item in items:
        if item.error is None:
            try:
                item.question = check_question(item.question)
            except LogicRouteError as e:
                item.error = str(e)
    return items


def renamed(old: str, new: str, cmd: click.Command, **fixed) -> click.Command:
    """A hidden command OLD that runs `cmd` (now reached as NEW) after a one-line note, with the
    values of `fixed` set (route -> ask --dry-run: dry_run=True): scripts written before a
    command moved still run, and `logicroute --help` lists only the new name."""

    def callback(*args, **kwargs):
        click.echo(f"note: `logicroute {old}` is now `logicroute {new}`", err=True)
        return cmd.callback(*args, **{**kwargs, **fixed})

    params = [p for p in cmd.params if p.name not in fixed]
    command = " ".join(w for w in new.split() if not w.startswith("-"))  # "ask --dry-run" -> "ask"
    note = f"The former name of `logicroute {new}`, with its options (see `logicroute {command} --help`)."
    return click.Command(old, params=params, callback=callback, help=note, hidden=True)


def injected(ctx: click.Context, name: str):
    """An object injected through ctx.obj (tests), else None = the default."""
    obj = ctx.find_object(dict)
    return obj.get(name) if obj else None


def injected_embedder(ctx: click.Context):
    """The embedder injected through ctx.obj (tests), else None = the shared default."""
    return injected(ctx, "embedder")


# ------------------------------------------------------------------ -q / -v


class _StderrHandler(logging.Handler):
    """Messages of the `logicroute` loggers on stderr, as the current sys.stderr (a CliRunner
    swaps it per call): warnings as 'warning: ...', info as the bare line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            msg = self.format(record)
            if record.levelno != logging.INFO:
                msg = f"{record.levelname.lower()}: {msg}"
            click.echo(msg, err=True)
        except Exception:  # a log line must never break the command
            self.handleError(record)


def configure_logging(ctx: click.Context, quiet: bool, verbose: bool) -> None:
    """-q: warnings and errors only, no progress bars; -v: debug messages too; default: info,
    warnings and progress. Progress bars ask the `logicroute` logger (engine.floor.base.progress), so
    the level set here reaches every bar. Undone when the command ends."""
    if quiet and verbose:
        raise click.UsageError("-q/--quiet and -v/--verbose exclude each other")
    logger = logging.getLogger(LOGGER)
    before = logger.level
    handler = _StderrHandler()
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    logger.addHandler(handler)

    def undo() -> None:
        logger.removeHandler(handler)
        logger.setLevel(before)

    ctx.call_on_close(undo)


def info(message: str) -> None:
    """A line of progress or result on stderr, hidden by -q."""
    if logging.getLogger(LOGGER).level <= logging.INFO:
        click.echo(message, err=True)
