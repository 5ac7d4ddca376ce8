"""Labels from a user's own questions: a JSONL of {question, answers} (or answer) over a KB they
already have, each answered on every route with the LLM and scored against its answers, as
`logicroute label --scorer answer` labels a shared set. `train specialist --questions FILE --kb
DIR` runs it before fine-tuning; the label file is resumable (a rerun answers only the rest).
"""

from __future__ import annotations

from pathlib import Path

from engine.floor.base.errors import LogicRouteError

MIN_QUESTIONS = 20  # below this a held-out split says nothing (the fine-tune keeps the generalist)


def label_own_questions(questions_file: str | Path, kb_dir: str | Path, out: str | Path, llm_spec: str, embedder=None):
    """The label file `out`, made (or completed) from `questions_file`'s questions over the KB at
    `kb_dir`; returns its path."""
    from engine.floor.llm.factory import make_llm
    from hierarchy.kb import KnowledgeBase
    from training.common.answer_scores import gold_style
    from training.labels.label_scorers import LabelConfig
    from training.labels.labels import label_questions, select_questions

    questions, ds, indices = select_questions(questions_file)
    if len(questions) < MIN_QUESTIONS:
        raise LogicRouteError(
            f"{questions_file}: {len(questions)} questions; a specialist needs at least {MIN_QUESTIONS} "
            "(a fifth of them is held out to judge it)"
        )
    if not KnowledgeBase.exists(kb_dir):
        raise LogicRouteError(f"no knowledge base at {kb_dir}: build it with `logicroute index SOURCE --kb {kb_dir}`")
    kb = KnowledgeBase.open(kb_dir, embedder)
    kb.require_chunks()
    _check_resumable(out, questions)
    cfg = LabelConfig(scorer="answer", routes=("chunk", "summary", "logic"), llm=llm_spec, style=gold_style(ds))
    label_questions(questions, kb, out, cfg, llm=make_llm(llm_spec), indices=indices)
    return Path(out)


def _check_resumable(out: str | Path, questions) -> None:
    """A rerun resumes `out` by each question's id, which a file of bare questions takes from its
    position: a row whose question is not the one now at that id would be trained on stale."""
    from training.labels.labels import read_labels

    if not Path(out).is_file():
        return
    now = {f"{q.dataset}:{q.id}": q.text for q in questions}
    for row in read_labels(out):
        asked = now.get(f"{row.get('dataset')}:{row.get('id')}")
        if asked is not None and asked != row.get("question"):
            raise LogicRouteError(
                f"{out} holds labels of other questions ({row.get('id')}: {row.get('question')!r}): "
                "the questions file changed; give another --out, or delete it to label again"
            )
