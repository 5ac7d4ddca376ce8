"""`logicroute ask`: one question, or a file of them, answered from a knowledge base (engine.face.cli
adds it to its group); with --dry-run, the router's decision only (engine.face.cli_route).

Every RoutedRAG setting comes from one RagConfig (engine.core.config, docs/configuration.md): a TOML
file (--config), `--set KEY=VALUE` pairs over it, then --llm, --style and --escalate when given
(and $LOGICROUTE_LLM). The --llm spec is checked before anything loads. Libraries load inside
the command: `logicroute --help` stays instant.

A file of questions is answered with a progress bar, and each answer is written as soon as it
is made (--out: appended and flushed, in the order they finish; stdout: in input order): a run
that is stopped keeps what it answered, and a rerun with the same --out answers only the rest.
When all are answered, --out is rewritten in input order.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
from pathlib import Path

import click

from engine.face.cli_options import (
    ROUTE_CHOICES,
    check_llm_spec,
    config_of,
    config_options,
    llm_option,
    read_items,
    style_option,
)
from engine.face.cli_route import NOTICE_MIN_QUESTIONS, routing_notice
from engine.floor.sources_text import format_sources

__all__ = ["NOTICE_MIN_QUESTIONS", "answer_record", "ask", "print_answer", "routing_notice"]
log = logging.getLogger("logicroute.cli")
BATCH_FAILED = 3  # the exit status of a --questions run in which some questions failed


@click.command()
@click.argument("question", required=False)
@click.option(
    "--kb",
    "kb_dir",
    type=click.Path(file_okay=False),
    help="knowledge base folder (with --dry-run: decide with its own router)",
)
@click.option(
    "--questions",
    "questions_file",
    type=click.Path(exists=True, dir_okay=False),
    help="answer every question of a file (.txt one per line, JSONL with a question field, or a QA data file): "
    "one JSON line per question, with a progress bar",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="with --questions: write the JSON lines here, each as soon as it is answered; a rerun answers only "
    "the questions not in it yet",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="the router's decision only: route probabilities, the route, the out-of-distribution flag; no "
    "retrieval, no LLM call, no --kb (with --questions: one JSON line each, a bad line an error record)",
)
@click.option(
    "--skip-bad",
    is_flag=True,
    help="with --questions: answer the good lines and skip the bad ones (not JSON, no question, too long), "
    "counted on stderr with their line numbers (default: a bad line refuses the batch, naming it)",
)
@click.option("--concurrency", type=click.IntRange(min=1), default=4, show_default=True, help="with --questions")
@click.option("--route", type=click.Choice(ROUTE_CHOICES), default="auto", show_default=True)
@click.option(
    "--escalate",
    is_flag=True,
    help="also check the chunk/summary answers that give an answer (a self-check call, or escalate_below) "
    "and retry the failing ones on the logic route",
)
@config_options
@click.option("--json", "as_json", is_flag=True, help="print the whole Answer as JSON (--questions: add the trace)")
@click.option(
    "--trace-format",
    type=click.Choice(["none", "json", "mermaid"]),
    default="none",
    help="also print the trace (mermaid: the logic route's DAG)",
)
@style_option("reader")
@llm_option
@click.pass_context
def ask(ctx, question, kb_dir, questions_file, out, dry_run, skip_bad, concurrency, route, **options):
    """Answer QUESTION (or every question of --questions) from the knowledge base --kb; with
    --dry-run, show where the router would send it.

    \b
    Exit status: 0 answered; 2 an error or a refusal, in one line on stderr;
    3 (--questions) some questions failed: each is named on stderr by FILE:LINE
    with its error, and the others are answered."""
    started = time.perf_counter()  # a time limit covers the command's own start-up too
    from engine.core.pipeline import RoutedRAG

    if (question is None) == (questions_file is None):
        raise click.UsageError("give a QUESTION or --questions FILE")
    if questions_file is None and (out is not None or skip_bad):
        raise click.UsageError("--out and --skip-bad go with --questions")
    config = config_of(ctx, options)
    if dry_run:
        from engine.face.cli_route import dry_run as decide

        return decide(ctx, question, questions_file, config, kb_dir, options["as_json"])
    if kb_dir is None:
        raise click.UsageError("Missing option '--kb' (the knowledge base folder; only --dry-run needs none)")
    if questions_file is not None and options["trace_format"] == "mermaid":
        raise click.UsageError("--trace-format mermaid draws one answer: give a QUESTION")
    check_llm_spec(config.llm_spec)  # a bad spec or a missing key fails now, not after the models load
    b = config.budget
    limits = {n: getattr(b, n) for n in ("max_llm_calls", "max_prompt_tokens", "max_seconds") if b and getattr(b, n)}
    log.debug("budget limits %s, threshold %s", limits, b.threshold if b else None)
    if config.budget is not None and config.budget.threshold is not None and route != "auto":
        log.warning(f"budget.thresholds decides routes; --route {route} forces one, so it is not used")
    items = read_batch(questions_file, skip_bad) if questions_file else None
    rag = RoutedRAG.open(kb_dir, **config.options())
    if items is not None:
        with_trace = options["as_json"] or options["trace_format"] == "json"
        answers = answer_file(rag, items, out, concurrency, route, with_trace, questions_file)
        if route == "auto":
            notice = routing_notice([router_route(a) for a in answers], [a.trace.ood for a in answers])
            if notice:
                log.warning(notice)
        return
    max_seconds = config.budget.max_seconds if config.budget is not None else None
    ans = within_limit(lambda: rag.answer(question, route=route, started=started), started, max_seconds)
    show(ans, options["as_json"], options["trace_format"])


def _is_the_process() -> bool:
    """Whether this command is the process (`logicroute ...`, `python -m engine.face.cli`), not a call
    inside another program (a test's CliRunner), which must not be ended with it."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return (spec is not None and spec.name == "engine.face.cli") or os.path.basename(sys.argv[0]) == "logicroute"


# How long past its time limit a command may run before it is stopped outright: the answer's own
# checks end it at the limit, and what follows its last call (grounding, merge) must fit; this
# catches what no check can cut (a model or embedder still loading).
HARD_STOP_GRACE = 1.0


def within_limit(answer, started: float, max_seconds: float | None):
    """answer()'s result, or DeadlineError once `max_seconds` (+ the grace) have passed since
    `started` (time.perf_counter) whatever it is doing: it runs on a daemon thread, which the
    command's exit then ends. None: no limit, answer() runs here."""
    if max_seconds is None:
        return answer()
    import threading

    from engine.floor.base.errors import DeadlineError
    from engine.floor.llm.base import seconds_words

    done: dict = {}

    def run() -> None:
        try:
            done["answer"] = answer()
        except BaseException as e:  # handed to the command's thread, which reports it
            done["error"] = e

    worker = threading.Thread(target=run, name="logicroute-answer", daemon=True)
    worker.start()
    worker.join(max(0.0, started + max_seconds + HARD_STOP_GRACE - time.perf_counter()))
    if worker.is_alive():
        stopped = DeadlineError(f"stopped at the {seconds_words(max_seconds)} s limit before an answer was ready")
        _end_now_or_raise(stopped)
    if isinstance(done.get("error"), DeadlineError):
        _end_now_or_raise(done["error"])
    if "error" in done:
        raise done["error"]
    return done["answer"]


def _end_now_or_raise(stopped: Exception) -> None:
    """A command stopped by its time limit ends now, its one line written: a normal exit tears
    down the loaded models (a second or more here) or waits on an answering thread still inside
    a load. Inside another program (a test's CliRunner) the error is raised instead."""
    if not _is_the_process():
        raise stopped
    from engine.floor.llm.urls import redact

    click.echo(f"error: {redact(str(stopped))}", err=True)
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(2)


def read_batch(path: str, skip_bad: bool = False) -> list:
    """The good items (line, question) of a questions file, read as `route --questions` reads it
    (engine.face.cli_options.read_items). A bad line refuses the batch in one line naming it
    (FILE:LINE), unless `skip_bad`: then the bad lines are counted on stderr, by number."""
    from engine.floor.base.errors import DataFormatError, LogicRouteError

    items = read_items(path)
    bad = [i for i in items if i.error is not None]
    numbers = ", ".join(str(i.line) for i in bad)
    if bad and not skip_bad:
        others = f"{len(bad)} bad lines ({numbers}); " if len(bad) > 1 else ""
        raise DataFormatError(f"{path}:{bad[0].line}: {bad[0].error} ({others}--skip-bad answers the good ones)")
    if bad:
        log.warning(f"skipped {len(bad)} bad line{'s' if len(bad) > 1 else ''} of {path}: {numbers}")
    good = [i for i in items if i.error is None]
    if not good:
        raise LogicRouteError(f"{path}: no questions")
    return good


def answer_record(question: str, ans, with_trace: bool = False, line: int | None = None) -> dict:
    """One JSON line of `ask --questions`; `line`: where the question stands in its file."""
    record: dict = {} if line is None else {"line": line}
    record |= {
        "question": question,
        "answer": ans.text,
        "route": ans.route,
        "route_probs": ans.route_probs,
        "usage": ans.usage.to_dict(),
        "flags": list(ans.flags),
        "ood": ans.trace.ood,
        "confidence": ans.trace.confidence,
        "sources": [s.to_dict() for s in ans.sources],
    }
    if with_trace:
        record["trace"] = ans.trace.to_dict()
    return record


def answer_file(
    rag, items: list, out: str | None, concurrency: int, route: str, with_trace: bool, questions_path: str = "-"
) -> list:
    """Answer the items of `questions_path`, `concurrency` at a time, with a progress bar; each
    record is written as soon as its answer is made (see the module docstring). The answers of
    this run are returned. A question that fails does not stop the others; once they are done,
    after their answers are written, the failures are reported (report_failures)."""
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from engine.floor.base.progress import progress_bar

    kept = answered_before(out, items) if out else {}
    todo = [i for i in items if i.line not in kept]
    if kept:
        log.info(f"{out}: {len(kept)} of {len(items)} questions answered before; answering the other {len(todo)}")
    records: dict[int, dict] = dict(kept)
    answers, failed, shown = {}, {}, 0
    rag.get_llm()  # one shared LLM, built before the threads start
    with progress_bar(len(todo), "answering", "question") as bar, _appender(out, kept) as append:
        pool = ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(todo) or 1)), thread_name_prefix="ask")
        try:
            futures = {pool.submit(rag.answer, i.question, route=route): i for i in todo}
            for future in as_completed(futures):
                item = futures[future]
                bar.update(1)
                try:
                    answers[item.line] = future.result()
                except Exception as e:  # its error is raised at the end: the others are still worth their answers
                    failed[item.line] = e
                    continue
                records[item.line] = answer_record(item.question, answers[item.line], with_trace, item.line)
                if append is not None:
                    append(records[item.line])
                else:  # stdout: in input order, each line as soon as the ones before it are printed
                    while shown < len(items) and items[shown].line in records:
                        click.echo(json.dumps(records[items[shown].line], ensure_ascii=False))
                        shown += 1
        finally:  # interrupted: the questions not started are dropped, the running ones finish
            pool.shutdown(wait=True, cancel_futures=True)
    if out is None:  # the lines held back behind a question that failed
        for item in items[shown:]:
            if item.line in records:
                click.echo(json.dumps(records[item.line], ensure_ascii=False))
    if failed:
        report_failures(questions_path, failed, len(items))
    if out:
        from engine.floor.base.files import atomic_write_text

        atomic_write_text(out, "".join(json.dumps(records[i.line], ensure_ascii=False) + "\n" for i in items))
        click.echo(f"{len(records)} answers -> {out}", err=True)
    return [answers[i.line] for i in todo]


def report_failures(path: str, failed: dict[int, BaseException], total: int) -> None:
    """Each failed question on stderr by FILE:LINE with its error, then how many failed, and the
    exit status BATCH_FAILED. An error that is not one of ours (a bug) is raised after the lines,
    with its traceback."""
    from engine.floor.base.errors import LogicRouteError
    from engine.floor.llm.urls import redact

    for line in sorted(failed):
        e = failed[line]
        why = str(e) if isinstance(e, LogicRouteError) else f"{type(e).__name__}: {e}"
        click.echo(f"{path}:{line}: {redact(why)}", err=True)
    click.echo(f"error: {len(failed)} of {total} questions failed; the others were answered", err=True)
    bug = next((failed[i] for i in sorted(failed) if not isinstance(failed[i], LogicRouteError)), None)
    if bug is not None:
        raise bug
    sys.exit(BATCH_FAILED)


def answered_before(out: str, items: list) -> dict[int, dict]:
    """The records of `out` (a file an earlier run wrote) that answer an item of this file: same
    line, same question, an answer. Anything else in it (a half-written last line, another file's
    answers) is not kept."""
    path = Path(out)
    if not path.is_file():
        return {}
    wanted = {i.line: i.question for i in items}
    kept: dict[int, dict] = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "answer" in record and wanted.get(record.get("line")) == record.get("question"):
            kept[record["line"]] = record
    return kept


@contextlib.contextmanager
def _appender(out: str | None, kept: dict[int, dict]):
    """`append(record)`: one line more in --out, on disk at once, after the records kept from
    before (--out rewritten with them first). None without --out."""
    if out is None:
        yield None
        return
    from engine.floor.base.files import atomic_write_text

    atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept.values()))
    with open(out, "a", encoding="utf-8") as f:

        def append(record: dict) -> None:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
            os.fsync(f.fileno())  # an answer can cost a minute of LLM time: it must survive a crash

        yield append


def router_route(ans) -> str:
    """The route the router chose, before an out-of-distribution fallback replaced it."""
    ood = ans.trace.ood or {}
    return ood.get("router_route") or (ans.trace.decision or {}).get("route") or ans.route


def show(ans, as_json: bool, trace_format: str) -> None:
    """One answer on stdout, with the trace asked for."""
    if as_json:
        click.echo(json.dumps(ans.to_dict(), indent=2, ensure_ascii=False))
    else:
        print_answer(ans)
    if trace_format == "json" and not as_json:
        click.echo(json.dumps(ans.trace.to_dict(), indent=2, ensure_ascii=False))
    elif trace_format == "mermaid":
        if not (ans.trace.dag or {}).get("nodes"):
            why = "it built none" if ans.route == "logic" else "only the logic route decomposes a question"
            click.echo(f"no DAG to draw: this answer took the {ans.route} route ({why})")
            return
        from engine.core.routes.logic.render import trace_to_mermaid

        click.echo(trace_to_mermaid(ans.trace))


def print_answer(ans, question: str | None = None) -> None:
    if question:
        click.secho(f"Q: {question}", bold=True)
    probs = ""
    if ans.route_probs:
        from engine.core.decide import overrode

        why = overrode(ans.trace.decision or {})
        probs = (
            f"  ({why}{'router ' if why else ''}" + ", ".join(f"{r} {p:.2f}" for r, p in ans.route_probs.items()) + ")"
        )
    click.echo(f"route: {ans.route}{probs}")
    click.secho(f"answer: {ans.text}", fg="green")
    if ans.trace.confidence is not None:  # the model's certainty: low means likely wrong
        click.echo(f"confidence: {ans.trace.confidence:.2f}")
    lines = format_sources(ans)
    if lines:
        click.echo("sources:")
        for line in lines:
            click.echo(f"  {line}")
    u = ans.usage
    click.echo(
        f"cost: {u.llm_calls} LLM calls, {u.prompt_tokens}+{u.completion_tokens} tokens, {u.seconds:.1f}s"
        + (f" ({u.cached_calls} cached; {u.llm_seconds_uncached:.1f}s of LLM time uncached)" if u.cached_calls else "")
    )
    for f in ans.flags:
        click.secho(f"flag: {f}", fg="yellow")
