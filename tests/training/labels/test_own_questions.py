"""A user's path to a specialist: `train specialist --questions FILE --kb DIR` answers each of
their questions on every route, scores the answers against theirs, and fine-tunes the shipped
(here: a small) generalist on those labels; the labels resume, and too few questions are refused."""

from __future__ import annotations

import json

from click.testing import CliRunner

from engine.face.cli import main
from engine.floor.base.types import Answer, Usage
from tests.fakes import ScriptedLLM
from tests.samples import TOPICS
from tests.training.adapt_setup import embedder, small_generalist, tiny_kb

LOGIC_TOPICS = {"river", "mountain", "film", "football"}  # where only the logic route answers right


def questions_file(path, n: int) -> str:
    topics = list(TOPICS)
    rows = []
    for i in range(n):
        topic = topics[i % len(topics)]
        rows.append({"question": f"Which {topic} {TOPICS[topic]} holds item {i}?", "answers": [f"{topic} answer {i}"]})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def scripted_routes(monkeypatch) -> list[str]:
    """Every route answers through this script: logic right on LOGIC_TOPICS, chunk and summary on
    the others; one call a route, logic's dearer."""
    answered: list[str] = []

    def answer_on(route, question, ctx):
        answered.append(route.name)
        topic, item = question.split()[1], question.rsplit(" ", 1)[1].rstrip("?")
        right = (topic in LOGIC_TOPICS) == (route.name == "logic")
        tokens = 2000 if route.name == "logic" else 500
        usage = Usage(llm_calls=1, prompt_tokens=tokens)
        return Answer(text=f"{topic} answer {item}" if right else "unknown", route=route.name, usage=usage, trace={})

    monkeypatch.setattr("training.labels.label_scorers.answer_on", answer_on)
    monkeypatch.setattr("engine.floor.llm.factory.make_llm", lambda *a, **kw: ScriptedLLM())
    return answered


def test_a_specialist_from_your_own_questions_over_your_kb(tmp_path, monkeypatch):
    answered = scripted_routes(monkeypatch)
    tiny_kb(tmp_path / "kb")
    generalist = small_generalist(tmp_path / "generalist.ckpt")
    args = ["train", "specialist", "--questions", questions_file(tmp_path / "mine.jsonl", 24)]
    args += ["--kb", str(tmp_path / "kb"), "--from", str(generalist), "--out", str(tmp_path / "mine.ckpt")]
    res = CliRunner().invoke(main, args, obj={"embedder": embedder()})
    assert res.exit_code == 0, res.output
    assert answered.count("chunk") == answered.count("summary") == answered.count("logic") == 24
    rows = [json.loads(line) for line in (tmp_path / "mine.labels.jsonl").read_text().splitlines()]
    assert len(rows) == 24 and {r["oracle"] for r in rows} == {"chunk", "logic"}
    logic_rows = [r for r in rows if r["question"].split()[1] in LOGIC_TOPICS]
    assert all(r["scores"]["logic"] == 1.0 and r["scores"]["chunk"] == 0.0 for r in logic_rows)
    assert (tmp_path / "mine.ckpt").is_file() and (tmp_path / "mine.card.json").is_file()
    assert "target held-out (n=4) specialist:" in res.output  # a fifth held out to judge it

    answered.clear()  # a rerun answers nothing again: the labels are kept
    again = CliRunner().invoke(main, args, obj={"embedder": embedder()})
    assert again.exit_code == 0, again.output
    assert answered == []


def test_too_few_questions_or_no_kb_is_refused_in_one_line(tmp_path, monkeypatch):
    scripted_routes(monkeypatch)
    tiny_kb(tmp_path / "kb")
    few = [
        "train",
        "specialist",
        "--questions",
        questions_file(tmp_path / "few.jsonl", 5),
        "--kb",
        str(tmp_path / "kb"),
    ]
    res = CliRunner().invoke(main, [*few, "--out", str(tmp_path / "x.ckpt")], obj={"embedder": embedder()})
    assert res.exit_code == 2 and "5 questions; a specialist needs at least 20" in res.stderr
    alone = ["train", "specialist", "--questions", str(tmp_path / "few.jsonl"), "--out", str(tmp_path / "x.ckpt")]
    res = CliRunner().invoke(main, alone, obj={"embedder": embedder()}, usage_error_expected=True)
    assert res.exit_code == 2 and "--questions and --kb go together" in res.output


def test_a_changed_questions_file_never_resumes_the_labels_of_the_old_one(tmp_path, monkeypatch):
    """Bare questions take their ids from their lines: an edited file under the same --out would
    train on the old questions' labels."""
    scripted_routes(monkeypatch)
    tiny_kb(tmp_path / "kb")
    generalist = small_generalist(tmp_path / "generalist.ckpt")
    mine = questions_file(tmp_path / "mine.jsonl", 24)
    args = ["train", "specialist", "--questions", mine, "--kb", str(tmp_path / "kb"), "--from", str(generalist)]
    args += ["--out", str(tmp_path / "mine.ckpt")]
    assert CliRunner().invoke(main, args, obj={"embedder": embedder()}).exit_code == 0
    lines = (tmp_path / "mine.jsonl").read_text().splitlines()
    (tmp_path / "mine.jsonl").write_text("\n".join(lines[1:] + lines[:1]) + "\n")  # the same questions, reordered
    res = CliRunner().invoke(main, args, obj={"embedder": embedder()})
    assert res.exit_code == 2 and "holds labels of other questions" in res.stderr
