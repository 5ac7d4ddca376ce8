"""With the real local model and MiniLM, on a tiny tool manual (four Markdown pages, one a
command, each with its Configuration options): the summary route's global mode lists commands
that take an option from several pages, within its bound of calls, every item citing a passage
that names it; and lists nothing invented for an option no page has (the reduce keeps only names
their cited passage holds)."""

from __future__ import annotations

import pytest

from engine.core.routes import RouteContext, SummaryRoute, answer_on
from engine.core.routes.common import cited_numbers
from engine.core.routes.summary_config import SummaryConfig
from engine.core.routes.summary_global import words_of
from engine.floor.prompts.answer import NOT_IN_DOCUMENTS

pytestmark = [pytest.mark.local_llm, pytest.mark.embedder]

PAGES = {
    "tool-build": ("Compiles the project.", ["force", "jobs"]),
    "tool-clean": ("Removes build output.", ["force", "dry-run"]),
    "tool-fetch": ("Downloads dependencies.", ["offline"]),
    "tool-serve": ("Starts a local web server.", ["port"]),
}


def page(name: str, about: str, options: list[str]) -> str:
    opts = "\n\n".join(f"#### `{o}`\n\n* Default: false\n\nSets {o} for {name}." for o in options)
    return f"# {name}\n\n### Description\n\n{about}\n\n### Configuration\n\n{opts}\n"


@pytest.fixture(scope="module")
def manual(tmp_path_factory, real_embedder):
    from engine.floor.llm.factory import make_llm
    from hierarchy.indexing import index_sources

    folder = tmp_path_factory.mktemp("manual")
    (folder / "docs").mkdir()
    for name, (about, options) in PAGES.items():
        (folder / "docs" / f"{name}.md").write_text(page(name, about, options))
    kb = index_sources(folder / "kb", [folder / "docs"], embedder=real_embedder, show_progress=False).kb
    return RouteContext(kb, make_llm(cache=folder / "llm_cache.sqlite"), 3, "reader")


GLOBAL = SummaryRoute(SummaryConfig(mode="global", map_calls=1))


def test_commands_taking_an_option_are_listed_from_several_pages_each_citing_its_passage(manual):
    ans = answer_on(GLOBAL, "Which tool commands take the `force` config option?", manual)
    assert ans.usage.llm_calls <= 2, ans.trace["llm_calls"]  # one map call, one retry at most
    listed = [line for line in ans.text.splitlines() if line.startswith("- ")]
    assert any("build" in line for line in listed) and any("clean" in line for line in listed), ans.text
    by_n = {s.n: s for s in ans.sources}
    for line in listed:
        name = line[2:].split(" [")[0]
        assert any(set(words_of(name)) <= set(words_of(f"{by_n[n].title} {by_n[n].text}")) for n in cited_numbers(line))


def test_nothing_is_invented_for_an_option_no_page_has(manual):
    ans = answer_on(GLOBAL, "Which tool commands take the `telemetry-upload` config option?", manual)
    assert ans.text == NOT_IN_DOCUMENTS or not any("telemetry" in line for line in ans.text.splitlines()), ans.text
