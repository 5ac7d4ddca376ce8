"""What the benchmarks over question sets, each set answered on its own KB, share on the command
line (`bench docs`, `bench global-lists-answer`): the repeated --set-file / --kb pair with --half,
--out and -k, the check that each set has its KB, the command as it could be typed again, and the
run record a report starts with. Only click and the standard library: the CLI imports it at once."""

from __future__ import annotations

import os
import platform
import shlex
from collections.abc import Sequence

import click


def set_kb_options(*, set_help: str, kb_help: str, systems, out_default: str):
    """--set-file (repeatable) and --kb (one per set, in order), the command's own `systems` option,
    --half, --out and -k, in that order in --help."""
    options = [
        click.option(
            "--set-file",
            "set_files",
            multiple=True,
            required=True,
            type=click.Path(exists=True, dir_okay=False),
            help=set_help,
        ),
        click.option(
            "--kb", "kbs", multiple=True, required=True, type=click.Path(exists=True, file_okay=False), help=kb_help
        ),
        systems,
        click.option(
            "--half",
            type=click.Choice(("tune", "judge", "all")),
            default="tune",
            show_default=True,
            help="which half of each set; judge is for judging a change only",
        ),
        click.option("--out", "out_dir", default=out_default, show_default=True, help="folder of report.md, results"),
        click.option("-k", "k", type=int, default=3, show_default=True, help="passages per retrieval"),
    ]

    def decorate(f):
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


def check_set_kbs(set_files: Sequence[str], kbs: Sequence[str]) -> None:
    if len(set_files) != len(kbs):
        raise click.UsageError(f"{len(set_files)} --set-file but {len(kbs)} --kb: give one --kb after each set")


def command_line(
    command: str, set_files, kbs, systems: str, half: str, out_dir: str, k: int, llm_spec: str, *flags: str
) -> str:
    """`logicroute bench COMMAND ...` as it could be typed again (the LLM only when it is not the
    default; `flags` the switches that were on, e.g. "--redo")."""
    from engine.floor.llm.base import DEFAULT_LLM

    words = ["logicroute", "bench", command]
    for s, kb in zip(set_files, kbs, strict=True):
        words += ["--set-file", s, "--kb", kb]
    words += ["--systems", systems, "--half", half, "--out", out_dir]
    if k != 3:
        words += ["-k", str(k)]
    if llm_spec != DEFAULT_LLM:
        words += ["--llm", llm_spec]
    return shlex.join(words + list(flags))


def machine(when: str = "end") -> str:
    """The processor, its CPUs and the load average (`when`: at the start or the end of the run)."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load {load} at the {when}"


def run_record(command: str, half: str, style: str, llm: str, k: int, systems: dict, sets) -> dict:
    """The record a report starts with; `sets` have name, path, kb and questions."""
    return {
        "command": command,
        "half": half,
        "style": style,
        "llm": llm,
        "k": k,
        "systems": systems,
        "sets": [{"name": s.name, "file": str(s.path), "kb": str(s.kb), "questions": len(s.questions)} for s in sets],
        "machine": machine(),
    }
