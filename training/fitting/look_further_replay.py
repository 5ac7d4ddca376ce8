"""The look-further step made for real on the label rows it would change: rows whose chunk answer
says it has none and whose absence verdict (engine.core.absence.weigh_absence, on the chunk route's
retrieval) is look_further get the chunk route's answer on the next k passages (the first k
excluded), scored against gold beside the kept absence and the label's summary and logic scores
(what the ladder's climb got). absence_replay scores a look further as the kept absence; this
gives it its answer.

    python -m training.fitting.look_further_replay --labels FILE --kb KB_DIR --out OUT.json [--llm SPEC]
"""

from __future__ import annotations

import argparse
import ast
import json


def _field(row: dict, key: str):
    value = row.get(key)
    return ast.literal_eval(value) if isinstance(value, str) else value or {}


def replay(labels: str, kb_dir: str, llm_spec: str | None = None) -> list[dict]:
    from engine.core.absence import weigh_absence
    from engine.core.routes.chunk import answer_chunk
    from engine.core.routes.common import looks_unanswered
    from engine.floor.embedder import get_embedder
    from engine.floor.llm.factory import make_llm
    from hierarchy.kb import KnowledgeBase
    from training.common.answer_scores import rouge_l

    kb = KnowledgeBase.open(kb_dir, get_embedder())
    llm = None
    out = []
    with open(labels) as f:
        rows = [json.loads(line) for line in f]
    for row in rows:
        text = _field(row, "answers_pred").get("chunk")
        if text is None or looks_unanswered(text) is None:
            continue
        k = int(row.get("k", 3))
        read = [c.chunk_id for c in kb.search(row["question"], k=k)]
        if not weigh_absence(kb, row["question"], read).get("look_further"):
            continue
        llm = llm or (make_llm(llm_spec) if llm_spec else make_llm())
        ans = answer_chunk(row["question"], kb, llm, k=k, style=row.get("style", "reader"), exclude=read)
        golds = _field(row, "answers")
        scores = _field(row, "scores")
        out.append({
            "id": row["id"], "further": round(rouge_l(ans.text, golds), 4), "abstained": round(rouge_l(text, golds), 4),
            "summary": scores.get("summary"), "logic": scores.get("logic"),
            "further_abstains": looks_unanswered(ans.text) is not None, "text": ans.text[:200],
        })  # fmt: skip
        print(json.dumps(out[-1]), flush=True)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--labels", required=True)
    ap.add_argument("--kb", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--llm", default=None)
    args = ap.parse_args(argv)
    rows = replay(args.labels, args.kb, args.llm)
    with open(args.out, "w") as f:
        json.dump(rows, f, indent=1)
    if rows:
        mean = {k: sum(float(r[k] or 0) for r in rows) / len(rows) for k in ("further", "abstained")}
        kept = mean["abstained"]
        print(f"{len(rows)} rows look further: mean ROUGE-L {mean['further']:.3f} (kept absence {kept:.3f})")


if __name__ == "__main__":
    main()
