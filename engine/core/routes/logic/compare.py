"""Conclusions computed in code for the final answer of comparison questions.

Why: the small model fails comparisons at the last step even with both facts in hand (it names
the younger of two birth dates as older), but told the conclusion in words it copies it. So for
"A or B?" questions whose compared facts are dates, and for "same X?" questions whose
sub-questions asked for X, the comparison is computed here and stated.
"""

from __future__ import annotations

import re

from engine.core.routes.logic.plan import SubQuestion, normalize
from engine.floor.question.forms import EARLY, LATE


def comparison_hint(question: str, nodes: dict[str, SubQuestion], known: list[SubQuestion]) -> str:
    """The computed conclusion as one sentence for the final answer's notes, or "" when none
    applies. `nodes` is the whole DAG (id -> node), `known` the nodes with a known answer."""
    return computed_comparison(question, nodes, known)[0]


def computed_comparison(question: str, nodes: dict[str, SubQuestion], known: list[SubQuestion]) -> tuple[str, str]:
    """(the conclusion as a sentence, the answer it gives: an option or yes/no), or ("", "")."""
    return _date_choice(question, nodes, known) or _same_check(question, known) or ("", "")


def _date_choice(question: str, nodes: dict[str, SubQuestion], known: list[SubQuestion]) -> tuple[str, str] | None:
    """ "Who died first, A or B?" with a date found for each of A and B -> which one it is."""
    m = re.search(r",\s*(.+?)\s+or\s+(.+?)\s*\?\s*$", question)
    early, late = bool(EARLY.search(question)), bool(LATE.search(question))
    if not m or early == late:
        return None
    options = [m.group(1).strip(), m.group(2).strip()]
    dated = [n for n in known if _date_key(n.answer or "")]
    picked: dict[str, SubQuestion] = {}
    for n in sorted(dated, key=lambda n: -n.rank):  # deepest facts first (bridge: the directors' dates)
        opts = [o for o in options if o not in picked and _mentions(nodes, n, o)]
        if len(opts) == 1:
            picked[opts[0]] = n
    if len(picked) != 2 or len({_date_key(n.answer or "") for n in picked.values()}) != 2:
        return None
    order = sorted(options, key=lambda o: _date_key(picked[o].answer or ""))
    win = order[0] if early else order[1]
    sentence = (
        f"Date comparison: {win} has the {'earlier' if early else 'later'} date "
        f"({picked[win].answer}), so the answer is {win}."
    )
    return sentence, win


def _mentions(nodes: dict[str, SubQuestion], n: SubQuestion, option: str) -> bool:
    """The option names this node or one of its ancestors (film -> its director -> his death)."""
    o = normalize(option)
    seen, todo = set(), [n.id]
    while todo:
        i = todo.pop()
        if i in seen or i not in nodes:
            continue
        seen.add(i)
        a = nodes[i]
        if o and o in normalize(f"{a.rewritten or a.question} {a.answer or ''}"):
            return True
        todo += a.depends_on
    return False


def _same_check(question: str, known: list[SubQuestion]) -> tuple[str, str] | None:
    """ "Are A and B of the same nationality?" with the nationality of each found -> yes/no."""
    m = re.search(r"\bsame (\w+)", question, re.I)
    if not m:
        return None
    attr = m.group(1).lower()[:6]  # "nationality" -> "nation", "country" -> "countr"
    asked = [n for n in known if attr in (n.rewritten or n.question).lower()]
    if len(asked) != 2:
        return None
    a, b = (normalize(n.answer or "") for n in asked)
    same = a == b or a in b or b in a or (len(a.split()) == len(b.split()) == 1 and a[:4] == b[:4])
    answer = "yes" if same else "no"
    sentence = (
        f"The answers {asked[0].answer} and {asked[1].answer} are {'the same' if same else 'different'}, "
        f"so the answer is {answer}."
    )
    return sentence, answer


_MONTHS = {
    m: i
    for i, m in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        1,
    )
}


def _date_key(text: str) -> tuple[int, int, int] | None:
    """(year, month, day) of a date written as '6 October 1988', 'February 27, 1975' or '1936'."""
    t = text.lower()
    years = re.findall(r"\b(1\d{3}|20\d{2})\b", t)
    if not years:
        return None
    month = next((i for m, i in _MONTHS.items() if m in t or re.search(rf"\b{m[:3]}\b", t)), 0)
    day = re.search(r"\b([0-3]?\d)(st|nd|rd|th)?\b(?!\d)", re.sub(r"\b(1\d{3}|20\d{2})\b", " ", t))
    return int(years[-1]), month, int(day.group(1)) if day and month else 0
