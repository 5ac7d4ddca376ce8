"""`logicroute ask`: the routing controls reach RoutedRAG and its Budget, a file of questions
becomes one JSON line each, a batch the router handles badly gets a notice, a bad --llm fails
before anything loads, and a mermaid trace without a DAG says so.
No model loads: RoutedRAG.open is replaced by a RoutedRAG over fakes, built with the options
the command passes (so what they do is the real RoutedRAG's doing)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

import engine.core.routes.logic.solve as logic_mod
from engine.core.pipeline import RoutedRAG
from engine.face.cli import main
from engine.face.cli_ask import BATCH_FAILED, NOTICE_MIN_QUESTIONS, answer_record, routing_notice
from engine.floor.base.types import Answer, RetrievedChunk, Source, Usage
from router.policy import Policy
from tests.fakes import FakeGuardedRouter, ScriptedLLM, WordOverlapKB, fake_logic
from tests.samples import PASSAGES_NAMING_THEM

NEAR_CHUNK = ["Where is the Eiffel Tower?", "What is the capital of Peru?", "Who wrote Emma?"]


@pytest.fixture
def opened(monkeypatch):
    """RoutedRAG.open over fakes; records the options the command passed. Set `.llm` first."""
    state = SimpleNamespace(llm=None, options=[], logic_calls=[])
    monkeypatch.setattr(logic_mod, "answer_logic", fake_logic(state.logic_calls))

    def open_fake(cls, kb, **options):
        state.options.append(options)
        kb = WordOverlapKB.titled(PASSAGES_NAMING_THEM)
        return RoutedRAG(kb=kb, llm=state.llm, router=FakeGuardedRouter(), **options)

    monkeypatch.setattr(RoutedRAG, "open", classmethod(open_fake))
    return state


def ask(*args, env=None, usage_error_expected=False):
    return CliRunner().invoke(
        main, ["ask", *map(str, args)], env=env, catch_exceptions=False, usage_error_expected=usage_error_expected
    )


def thresholds_file(tmp_path, threshold: float = 0.3):
    path = tmp_path / "thresholds.json"
    Policy(kind="threshold", route="logic", threshold=threshold, target_share=0.3).save(path)
    return path


# ---------------------------------------------------------------- routing controls


def test_a_thresholds_file_sends_a_question_to_logic_that_argmax_keeps_on_chunk(opened, tmp_path):
    q = "Who built the old bridge? [p=0.4]"  # chunk 0.42, logic 0.40: argmax says chunk
    opened.llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "Telford"}, replies=["Telford"])
    res = ask(q, "--kb", tmp_path, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["route"] == "chunk" and opened.options[-1]["budget"] is None
    res = ask(q, "--kb", tmp_path, "--json", "--set", f"budget.thresholds={thresholds_file(tmp_path, 0.3)}")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["route"] == "logic"
    assert out["trace"]["decision"] == {"route": "logic", "policy": "threshold", "threshold": 0.3, "logic_share": 0.3}


def test_the_limits_bound_the_logic_route(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "1970"})
    args = ["--route", "logic", "--set", "budget.max_llm_calls=5", "--set", "budget.max_prompt_tokens=900"]
    args += ["--set", "budget.max_seconds=30"]
    res = ask("When was it built?", "--kb", tmp_path, *args)
    assert res.exit_code == 0, res.output
    budget = opened.options[-1]["budget"]
    assert (budget.max_llm_calls, budget.max_prompt_tokens, budget.max_seconds) == (5, 900, 30.0)
    got = opened.logic_calls[-1]["budget"]
    assert (got.max_llm_calls, got.max_prompt_tokens, got.max_seconds) == (5, 900, 30.0)


def test_a_prompt_token_limit_no_call_fits_in_is_one_line_and_no_call(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"": "Paris"})
    res = ask(NEAR_CHUNK[0], "--kb", tmp_path, "--set", "budget.max_prompt_tokens=25")
    assert res.exit_code == 2 and opened.llm.calls == []  # not a blank answer and exit 0
    assert res.output.startswith("error: max_prompt_tokens=25 allows no LLM call: ") and res.output.count("\n") == 1


def test_thresholds_and_limits_make_one_budget(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "1970"})
    thresholds = f"budget.thresholds={thresholds_file(tmp_path, 0.5)}"
    res = ask("When? [p=0.9]", "--kb", tmp_path, "--set", thresholds, "--set", "budget.max_llm_calls=4")
    assert res.exit_code == 0, res.output
    budget = opened.options[-1]["budget"]
    assert (budget.threshold, budget.max_llm_calls) == (0.5, 4)
    assert opened.logic_calls[-1]["budget"].max_llm_calls == 4


def test_a_forced_route_answers_alone_and_escalate_opts_into_the_retry(opened, tmp_path):
    def llm():
        return ScriptedLLM(rules={"Decompose": "plan", "Final answer": "30 July 1970"}, replies=["unknown"])

    opened.llm = llm()
    res = ask("When was he born?", "--kb", tmp_path, "--route", "chunk", "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["route"] == "chunk" and out["text"] == "unknown" and out["usage"]["llm_calls"] == 1
    opened.llm = llm()
    res = ask("When was he born?", "--kb", tmp_path, "--route", "chunk", "--escalate", "--json", *NO_GATE)
    out = json.loads(res.output)
    assert out["route"] == "logic" and out["text"] == "30 July 1970"
    assert out["trace"]["escalated_from"]["route"] == "chunk"
    opened.llm = llm()
    res = ask("When was he born?", "--kb", tmp_path, "--json", *NO_GATE, "--set", "retry_unanswered=false")
    assert json.loads(res.output)["text"] == "unknown" and opened.options[-1]["retry_unanswered"] is False


# the evidence gate (engine.core.absence, tests/engine/test_absence.py) off: these specify the ladder
NO_GATE = ("--set", "keep_absence=false")


def test_the_retry_ladder_is_an_option_and_a_ladder_that_does_not_climb_is_refused(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"Question:": "Warsaw"})
    ask("Where?", "--kb", tmp_path, "--route", "chunk")
    assert opened.options[-1]["retry_routes"] == ("summary", "logic")  # the default: summary first
    ask("Where?", "--kb", tmp_path, "--route", "chunk", "--set", "retry_routes=logic")
    assert opened.options[-1]["retry_routes"] == ("logic",)
    res = ask("Where?", "--kb", tmp_path, "--set", "retry_routes=logic,summary")
    assert res.exit_code == 2 and "cheaper to costlier" in res.output


def test_escalate_turns_the_checks_on(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "30 July 1970"}, replies=["unknown"])
    res = ask("When was he born?", "--kb", tmp_path, "--route", "chunk", "--json", "--escalate", *NO_GATE)
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["route"] == "logic"
    assert opened.options[-1]["escalate"] is True and opened.options[-1]["escalate_below"] is None
    opened.llm = ScriptedLLM(rules={"Decompose": "plan", "Final answer": "30 July 1970"}, replies=["unknown"])
    res = ask("When was he born?", "--kb", tmp_path, "--route", "chunk", "--escalate", "--set", "escalate_below=0.6")
    assert res.exit_code == 0 and opened.options[-1]["escalate_below"] == 0.6
    res = ask("When was he born?", "--kb", tmp_path, "--escalate", "--set", "escalate_below=1.5")
    assert res.exit_code == 2 and "1.5" in res.output


def test_a_thresholds_file_that_is_not_a_threshold_policy_is_one_line(opened, tmp_path):
    bad = tmp_path / "argmax.json"
    Policy(kind="argmax").save(bad)
    res = CliRunner().invoke(main, ["ask", "Who?", "--kb", str(tmp_path), "--set", f"budget.thresholds={bad}"])
    assert res.exit_code == 2 and res.output.startswith("error: ") and "threshold policy" in res.output
    assert opened.options == []  # refused before the KB opened


# ---------------------------------------------------------------- --questions


def by_question(messages):
    last = messages[-1]["content"]
    asked = [("the Eiffel Tower?", "Paris"), ("of Peru?", "Lima"), ("wrote Emma?", "Jane Austen")]
    return next((a for q, a in asked if q in last), "?")


def test_questions_become_one_json_line_each_in_order(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"Proposed answer": {"answered": True}, "": by_question})
    qfile = tmp_path / "qs.txt"
    qfile.write_text("\n".join(NEAR_CHUNK) + "\n")
    out = tmp_path / "answers.jsonl"
    res = ask("--questions", qfile, "--kb", tmp_path, "--out", out, "--concurrency", 1)
    assert res.exit_code == 0, res.output
    assert res.stdout == "" and "3 answers" in res.stderr
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [x["question"] for x in lines] == NEAR_CHUNK
    assert [x["answer"] for x in lines] == ["Paris", "Lima", "Jane Austen"]
    first = lines[0]
    assert first["route"] == "chunk" and set(first["route_probs"]) == {"chunk", "summary", "logic"}
    assert first["usage"]["llm_calls"] == 1 and first["flags"] == [] and first["ood"]["far"] is False
    assert "trace" not in first


def test_each_answer_is_written_as_it_is_made_and_a_rerun_answers_only_the_rest(opened, tmp_path):
    from engine.floor.base.errors import LLMError

    def down_for_emma(messages):
        if "wrote Emma?" in messages[-1]["content"]:
            raise LLMError("the endpoint is down")
        return by_question(messages)

    qfile = tmp_path / "qs.txt"
    qfile.write_text("\n".join(NEAR_CHUNK) + "\n")
    out = tmp_path / "answers.jsonl"
    args = ("--questions", qfile, "--kb", tmp_path, "--out", out, "--route", "chunk", "--set", "retry_unanswered=false")
    opened.llm = ScriptedLLM(rules={"": down_for_emma})
    first = CliRunner().invoke(main, ["ask", *map(str, args), "--concurrency", "1"])
    assert first.exit_code == BATCH_FAILED and f"{qfile}:3: the endpoint is down\n" in first.stderr
    assert [json.loads(x)["answer"] for x in out.read_text().splitlines()] == ["Paris", "Lima"]  # kept
    assert "answering" in first.stderr and "3/3" in first.stderr  # the progress bar, on stderr
    opened.llm = ScriptedLLM(rules={"": by_question})
    rerun = ask(*args)
    assert rerun.exit_code == 0, rerun.output
    assert "2 of 3 questions answered before; answering the other 1" in rerun.stderr
    (call,) = opened.llm.calls  # Emma's question only
    assert "Emma" in call["messages"][-1]["content"]
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(x["line"], x["answer"]) for x in lines] == [(1, "Paris"), (2, "Lima"), (3, "Jane Austen")]


def test_a_half_written_line_or_another_files_answers_are_not_taken_as_answered(opened, tmp_path):
    qfile = tmp_path / "qs.txt"
    qfile.write_text("\n".join(NEAR_CHUNK) + "\n")
    out = tmp_path / "answers.jsonl"
    stale = {"line": 1, "question": "What is the capital of Chad?", "answer": "N'Djamena"}
    out.write_text(json.dumps(stale) + '\n{"line": 2, "question": "What is the ca')  # killed mid-line
    opened.llm = ScriptedLLM(rules={"": by_question})
    res = ask(
        "--questions", qfile, "--kb", tmp_path, "--out", out, "--route", "chunk", "--set", "retry_unanswered=false"
    )
    assert res.exit_code == 0, res.output
    assert [json.loads(x)["answer"] for x in out.read_text().splitlines()] == ["Paris", "Lima", "Jane Austen"]


def test_questions_from_jsonl_go_to_stdout_with_the_trace_when_asked(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"": by_question})
    qfile = tmp_path / "qs.jsonl"
    qfile.write_text("".join(json.dumps({"question": q, "id": i}) + "\n" for i, q in enumerate(NEAR_CHUNK[:2])))
    res = ask("--questions", qfile, "--kb", tmp_path, "--route", "chunk", "--json")
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert [x["answer"] for x in lines] == ["Paris", "Lima"]
    assert all(x["trace"]["decision"]["policy"] == "forced" for x in lines)


def test_question_and_questions_exclude_each_other(opened, tmp_path):
    qfile = tmp_path / "qs.txt"
    qfile.write_text("Who?\n")
    for args in (["Who?", "--questions", qfile], [], ["Who?", "--out", tmp_path / "o.jsonl"]):
        res = CliRunner().invoke(main, ["ask", "--kb", str(tmp_path), *map(str, args)], usage_error_expected=True)
        assert res.exit_code == 2 and "Usage" in res.output
    assert opened.options == []


def test_a_bad_line_refuses_the_batch_naming_its_file_and_line(opened, tmp_path):
    qfile = tmp_path / "qs.txt"
    qfile.write_text(f"{NEAR_CHUNK[0]}\n{'word ' * 900}\n{NEAR_CHUNK[1]}\n")
    res = ask("--questions", qfile, "--kb", tmp_path)
    assert res.exit_code == 2 and opened.options == []  # refused before anything loads
    assert res.output == (
        f"error: {qfile}:2: the question has 900 words; the limit is 400 (it must leave room for evidence) "
        "(--skip-bad answers the good ones)\n"
    )
    jfile = tmp_path / "qs.jsonl"
    jfile.write_text(json.dumps({"question": NEAR_CHUNK[0]}) + '\n{"question": \n{"q": "Who?"}\n')
    res = ask("--questions", jfile, "--kb", tmp_path)
    assert res.exit_code == 2 and res.output.startswith(f"error: {jfile}:2: not JSON (")
    assert res.output.endswith(" (2 bad lines (2, 3); --skip-bad answers the good ones)\n")


def test_skip_bad_answers_the_good_lines_and_counts_the_bad_ones_by_number(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"": by_question})
    qfile = tmp_path / "qs.jsonl"
    lines = [{"question": NEAR_CHUNK[0]}, {"q": "Who?"}, {"question": NEAR_CHUNK[1]}, {"question": "x" * 5000}]
    qfile.write_text("".join(json.dumps(x) + "\n" for x in lines))
    res = ask("--questions", qfile, "--kb", tmp_path, "--route", "chunk", "--skip-bad")
    assert res.exit_code == 0, res.output
    records = [json.loads(line) for line in res.stdout.splitlines()]
    assert [(r["line"], r["answer"]) for r in records] == [(1, "Paris"), (3, "Lima")]
    assert f"warning: skipped 2 bad lines of {qfile}: 2, 4" in res.stderr
    alone = ask("Who?", "--kb", tmp_path, "--skip-bad", usage_error_expected=True)
    assert alone.exit_code == 2 and "--skip-bad go with --questions" in alone.output


def test_a_record_carries_the_answers_sources_and_its_trace_as_json():
    src = Source.of(1, RetrievedChunk("c1", "peru", "Peru", "Lima is the capital of Peru.", 0.9))
    trace = {"route": "chunk", "llm_calls": [], "flags": [], "confidence": 0.8}
    record = answer_record("Q?", Answer("Lima", "chunk", Usage(), trace, sources=[src]), with_trace=True)
    assert record["sources"] == [src.to_dict()] and record["confidence"] == 0.8 and record["ood"] is None
    assert json.loads(json.dumps(record))["trace"] == trace


# ---------------------------------------------------------------- the notice on a badly routed batch


def test_a_batch_all_on_one_route_gets_a_notice(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"Proposed answer": {"answered": True}, "": "Lima"})
    qfile = tmp_path / "qs.txt"
    qfile.write_text("".join(f"What is the capital of country {i}?\n" for i in range(NOTICE_MIN_QUESTIONS)))
    res = ask("--questions", qfile, "--kb", tmp_path)
    assert res.exit_code == 0, res.output
    assert f"all {NOTICE_MIN_QUESTIONS} questions to the chunk route" in res.stderr
    assert "logicroute calibrate" in res.stderr and "logicroute train specialist" in res.stderr


def test_a_batch_all_far_from_the_training_questions_gets_a_notice(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"Proposed answer": {"answered": True}, "": "Lima"})
    qfile = tmp_path / "qs.txt"
    mixed = ["Who was the first king? [far]", "Give an overview of it [far]", "What is it? [far]"]
    qfile.write_text("".join(mixed[i % 3] + f" {i}\n" for i in range(NOTICE_MIN_QUESTIONS)))
    res = ask("--questions", qfile, "--kb", tmp_path, "--set", "ood_policy=chunk")
    assert res.exit_code == 0, res.output
    assert "far from the router's training questions" in res.stderr and "logicroute calibrate" in res.stderr


def test_a_mixed_small_or_forced_batch_gets_no_notice(opened, tmp_path):
    opened.llm = ScriptedLLM(rules={"Proposed answer": {"answered": True}, "Decompose": "plan", "": "Lima"})
    qfile = tmp_path / "qs.txt"
    qfile.write_text("".join(f"Who was the first king {i}?\n" for i in range(NOTICE_MIN_QUESTIONS)))
    res = ask("--questions", qfile, "--kb", tmp_path, "--route", "chunk")  # forced: the router did not choose
    assert res.exit_code == 0 and "notice" not in res.stderr and "calibrate" not in res.stderr
    assert routing_notice(["chunk"] * (NOTICE_MIN_QUESTIONS - 1), [None] * (NOTICE_MIN_QUESTIONS - 1)) is None
    assert routing_notice(["chunk", "logic"] * NOTICE_MIN_QUESTIONS, [None] * 2 * NOTICE_MIN_QUESTIONS) is None


# ---------------------------------------------------------------- a bad --llm fails before anything loads


@pytest.fixture
def nothing_loads(monkeypatch, isolated_llm_env):
    import engine.floor.embedder

    calls = []
    monkeypatch.setattr(engine.floor.embedder, "get_embedder", lambda *a, **k: calls.append("get_embedder"))
    monkeypatch.setattr(engine.floor.embedder.Embedder, "__init__", lambda *a, **k: calls.append("Embedder"))
    monkeypatch.setattr(RoutedRAG, "open", classmethod(lambda cls, *a, **k: calls.append("open")))
    return calls


@pytest.mark.parametrize(
    "spec, message",
    [
        ("nonsense", "bad LLM spec"),
        ("local:no-such-model", "unknown local model"),
        ("local:/nowhere/model.gguf", "local model file not found"),
        ("openai:gpt-4o-mini", "no API key"),
    ],
)
def test_a_bad_llm_fails_before_the_embedder_or_the_kb(nothing_loads, tmp_path, spec, message):
    qfile = tmp_path / "qs.txt"
    qfile.write_text("Who?\n")
    for args in (["Who?"], ["--questions", str(qfile)]):
        res = CliRunner().invoke(main, ["ask", *args, "--kb", str(tmp_path / "kb"), "--llm", spec])
        assert res.exit_code == 2 and res.output.startswith("error: ") and message in res.output
        assert len(res.output.strip().splitlines()) == 1
    assert nothing_loads == []


def test_a_self_hosted_endpoint_needs_no_key(nothing_loads, tmp_path):
    res = CliRunner().invoke(main, ["ask", "Who?", "--kb", str(tmp_path), "--llm", "openai:m@http://127.0.0.1:9/v1"])
    assert nothing_loads == ["open"]  # the check passed; the fake KB opener then ends the command
    assert "no API key" not in res.output


# ---------------------------------------------------------------- mermaid


def test_mermaid_of_an_answer_without_a_dag_is_one_note(opened, tmp_path):
    opened.llm = ScriptedLLM(replies=["Lima"])
    res = ask("What is the capital of Peru?", "--kb", tmp_path, "--route", "chunk", "--trace-format", "mermaid")
    assert res.exit_code == 0, res.output
    assert "no DAG to draw: this answer took the chunk route" in res.stdout and "flowchart" not in res.stdout


def test_mermaid_of_a_logic_answer_draws_its_dag(opened, monkeypatch, tmp_path):
    def answer_logic(question, kb, llm, config=None, style="short", budget=None):
        dag = {"nodes": [{"id": "n1", "question": "Who directed it?", "rank": 0, "answer": "Nolan"}], "edges": []}
        return Answer("1970", "logic", Usage(), {"llm_calls": [], "flags": [], "dag": dag, "question": question})

    monkeypatch.setattr(logic_mod, "answer_logic", answer_logic)
    opened.llm = ScriptedLLM()
    res = ask("When was the director born?", "--kb", tmp_path, "--route", "logic", "--trace-format", "mermaid")
    assert res.exit_code == 0, res.output
    assert "flowchart TD" in res.stdout and "Nolan" in res.stdout and "no DAG" not in res.stdout


class SureLLM(ScriptedLLM):
    """Reports a token probability of exp(-0.2) = 0.82 for every token, as the local model reports its own."""

    def chat(self, messages, **kw):
        c = super().chat(messages, **kw)
        c.token_logprobs = [-0.2]
        return c


def test_the_models_confidence_is_shown_with_a_cheap_answer_and_kept_in_each_json_line(opened, tmp_path):
    opened.llm = SureLLM(rules={"": by_question})
    res = ask("Where is the Eiffel Tower?", "--kb", tmp_path, "--route", "chunk")
    assert res.exit_code == 0, res.output
    assert "answer: Paris" in res.output and "confidence: 0.82" in res.output
    qfile = tmp_path / "qs.txt"
    qfile.write_text("Where is the Eiffel Tower?\n")
    res = ask("--questions", qfile, "--kb", tmp_path, "--route", "chunk")
    assert json.loads(res.stdout.splitlines()[0])["confidence"] == 0.8187


def test_ask_passes_the_logic_preset(opened, tmp_path):
    opened.llm = ScriptedLLM(replies=["Warsaw"])
    res = ask(
        "Where was Marie Curie born?", "--kb", tmp_path, "--route", "chunk", "--json", "--set", "logic_preset=lean"
    )
    assert res.exit_code == 0 and json.loads(res.output)["text"] == "Warsaw"
    assert opened.options[-1]["logic_preset"] == "lean"
    assert ask("Where?", "--kb", tmp_path, "--set", "logic_preset=fast").exit_code == 2
