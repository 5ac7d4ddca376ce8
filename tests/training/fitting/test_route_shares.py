"""Where routers send a set of questions (training.fitting.route_shares): the share of each route
under the default decision and the router's own, read from a question file's chosen half."""

from __future__ import annotations

import json

from training.fitting.route_shares import markdown, read_questions, shares


def test_a_question_files_half_is_read_and_shares_are_counted_per_route(tmp_path):
    path = tmp_path / "lists.jsonl"
    rows = [{"question": f"Which commands take --x{i}?", "half": "judge" if i % 2 else "tune"} for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read_questions(f"{path}:judge") == ["Which commands take --x1?", "Which commands take --x3?"]
    assert len(read_questions(str(path))) == 4
    assert shares(["summary", "summary", "chunk", "logic"]) == {"chunk": 0.25, "summary": 0.5, "logic": 0.25}
    table = markdown({"new.ckpt": {"lists": {"n": 4, "decided": shares(["summary"] * 4),
                                             "router": shares(["summary"] * 4), "far": 0.0}}})  # fmt: skip
    assert "| new.ckpt | lists | 4 | 0% / 100% / 0% | 0% / 100% / 0% | 0% |" in table
