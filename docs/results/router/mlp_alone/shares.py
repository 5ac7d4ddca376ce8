"""How far the router's MLP alone gets against the full decision (issue 67 item 3): where each
decision sends the routing spec's questions (lookups kept off logic, multi-hop questions to
logic: 72 hand-written and 20 fresh of each), the held-out list questions (the judge halves of
npm, Valgrind and Node) and NQ / SQuAD 1000-1199. No LLM call. From the repository root:

    PYTHONPATH=. .venv/bin/python docs/results/router/mlp_alone/shares.py [CKPT ...] > shares.jsonl

Decisions: "mlp" = the learned stage's argmax alone (every rule stage off), "mlp+gate" = with the
list gate, "mlp+form" = with the form stage, "full" = the serving decision (gate and form; no
out-of-distribution stage: it changes no route without a fallback policy)."""

import json
import sys

from engine.core.decide import Decider, FormStage, ListGateStage
from engine.floor.embedder import get_embedder
from router.checkpoint import DEFAULT_CHECKPOINT, load_router
from tests.router.routing_questions import MULTI_HOP, ONE_HOP
from tests.router.routing_questions_fresh import MULTI_HOP_FRESH, ONE_HOP_FRESH
from training.fitting.route_shares import read_questions

DECIDERS = {
    "mlp": Decider(list_gate=ListGateStage(False), form=FormStage(False)),
    "mlp+gate": Decider(form=FormStage(False)),
    "mlp+form": Decider(list_gate=ListGateStage(False)),
    "full": Decider(),
}


def main(checkpoints: list[str]) -> None:
    emb = get_embedder()
    lists = [
        q for c in ("npm", "valgrind", "node") for q in read_questions(f"training/data/global_lists/{c}.jsonl:judge")
    ]
    sets = {
        "lookups_off_logic": (ONE_HOP, "logic", False),
        "fresh_lookups_off_logic": (ONE_HOP_FRESH, "logic", False),
        "multi_hop_to_logic": (MULTI_HOP, "logic", True),
        "fresh_multi_hop_to_logic": (MULTI_HOP_FRESH, "logic", True),
        "judge_lists_to_summary": (lists, "summary", True),
        "nq_on_chunk": (read_questions("nq:1000:200"), "chunk", True),
        "squad_on_chunk": (read_questions("squad:1000:200"), "chunk", True),
    }
    for ckpt in checkpoints or [str(DEFAULT_CHECKPOINT)]:
        router = load_router(ckpt, embedder=emb)
        for name, decider in DECIDERS.items():
            row = {"checkpoint": ckpt, "decision": name}
            for key, (questions, route, sent) in sets.items():
                hits = sum((d.route == route) == sent for d in decider.decide_many(router, questions))
                row[key] = f"{hits}/{len(questions)}"
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
