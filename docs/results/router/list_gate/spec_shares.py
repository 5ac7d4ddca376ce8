"""Where checkpoints send the routing spec's questions and the held-out list questions: lookups kept
off logic (72 hand-written, 20 fresh), multi-hop questions sent to logic (72, 20), the list
questions' judge halves sent to summary, NQ and SQuAD 1000-1199 kept on chunk. Used for the seed
study of README.md; run from the repository root:

    PYTHONPATH=. .venv/bin/python docs/results/router/list_gate/spec_shares.py A.ckpt B.ckpt ...
"""

import json
import sys

from engine.core.decide import Decider
from engine.floor.embedder import get_embedder
from router.checkpoint import load_router
from tests.router.routing_questions import MULTI_HOP, ONE_HOP
from tests.router.routing_questions_fresh import MULTI_HOP_FRESH, ONE_HOP_FRESH
from training.fitting.route_shares import read_questions


def main(checkpoints: list[str]) -> None:
    emb = get_embedder()
    corpora = ("npm", "valgrind", "node")
    lists = [q for c in corpora for q in read_questions(f"training/data/global_lists/{c}.jsonl:judge")]
    nq, squad = read_questions("nq:1000:200"), read_questions("squad:1000:200")
    for ckpt in checkpoints:
        router = load_router(ckpt, embedder=emb)

        def count(questions, route, sent=True, router=router):
            return sum((d.route == route) == sent for d in Decider().decide_many(router, questions))

        row = {
            "checkpoint": ckpt,
            "lookups_off_logic": count(ONE_HOP, "logic", sent=False),
            "fresh_lookups_off_logic": count(ONE_HOP_FRESH, "logic", sent=False),
            "multi_hop_to_logic": count(MULTI_HOP, "logic"),
            "fresh_multi_hop_to_logic": count(MULTI_HOP_FRESH, "logic"),
            "lists_to_summary": round(count(lists, "summary") / len(lists), 3),
            "nq_on_chunk": count(nq, "chunk") / len(nq),
            "squad_on_chunk": count(squad, "chunk") / len(squad),
        }
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
