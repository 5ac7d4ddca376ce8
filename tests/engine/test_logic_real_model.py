"""The logic route with the real local Qwen2.5-Coder-1.5B (marked `local_llm`), on a tiny
invented two-hop corpus."""

from __future__ import annotations

import pytest

from engine.core.budget import Budget
from engine.core.routes.logic.config import LogicConfig
from engine.core.routes.logic.solve import answer_logic

TWO_HOP = [
    (
        "The Silver Lantern",
        "The Silver Lantern is a 1987 drama film directed by Maren Holt. It follows a "
        "lighthouse keeper during a long winter.",
    ),
    (
        "Maren Holt",
        "Maren Holt (born 4 March 1941) is a film director. She was born in the harbour town of "
        "Vellmark and studied painting before turning to cinema.",
    ),
    ("The Copper Road", "The Copper Road is a 1992 western film directed by Tobias Renn, shot in the desert."),
    ("Tobias Renn", "Tobias Renn (born 1950) is a director and screenwriter born in the mountain village of Oskeby."),
    ("Northern Tide", "Northern Tide is a 1979 documentary about fishing fleets, directed by Alma Vries."),
    ("Alma Vries", "Alma Vries is a documentary maker who was born in the river city of Dunwick in 1938."),
    ("Vellmark", "Vellmark is a small harbour town known for its annual herring festival."),
]


@pytest.mark.local_llm
def test_logic_route_local_llm_two_hop(tmp_path):
    from engine.floor.llm.factory import make_llm
    from hierarchy.documents import Document
    from hierarchy.kb import KnowledgeBase

    kb = KnowledgeBase.create(tmp_path / "kb")
    kb.add([Document(id=f"d{i}", title=t, text=x) for i, (t, x) in enumerate(TWO_HOP)], show_progress=False)
    llm = make_llm(cache=tmp_path / "llm_cache.sqlite")
    # a generous deadline: this checks the DAG on the real model, not how busy the machine is
    q = "In which town was the director of the film The Silver Lantern born?"
    ans = answer_logic(q, kb, llm, LogicConfig(), budget=Budget(max_seconds=3600))
    dag = ans.trace["dag"]
    assert len(dag["nodes"]) >= 2 and dag["edges"], dag
    by_id = {n["id"]: n for n in dag["nodes"]}
    parent, child = dag["edges"][0]
    assert by_id[parent]["answer"] and by_id[parent]["answer"].lower() in by_id[child]["query"].lower(), dag
    assert "maren holt" in by_id[child]["query"].lower(), dag
    assert "vellmark" in ans.text.lower(), (ans.text, ans.trace)
