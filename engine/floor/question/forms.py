"""Plans read off the question's form, without any model: the sub-questions a few fixed forms
ask for (the logic route's LogicConfig.plan_forms, and the router's form policy). Only the
standard library: importing this is free.

Why: the decomposition call is about a quarter of the logic route's prompt tokens (~500 of
~2,100 a 2Wiki question with the lean settings), and for a few common English forms the plan it
should write is fixed by the form alone:

- two options compared by a date: "Who was born first, A or B?", "Which film came out first,
  A or B?"; through a relation: "Which film has the director who died first, A or B?";
- two things checked for the same country or nationality: "Were A and B from the same
  country?", "Are the directors of films A and B from the same country?";
- a relation chain: "When was the director of film X born?", "Where did X's father die?",
  "Who is the paternal grandfather of X?", "When was the founder of the company that built X
  born?" (a thing named by what it did to a name).

These are the shapes of the decomposition prompt's own examples, and their comparisons are the
ones the logic route concludes in code (engine/core/routes/logic/compare.py). Any other form, or any
doubt (two "or"s, two "and"s, an object that is not a name), returns None, and the LLM
decomposes as before.
"""

from __future__ import annotations

import re

_RELATIONS = (
    "director|performer|composer|producer|writer|author|screenwriter|creator|founder|lyricist|"
    "father|mother|spouse|husband|wife|son|daughter|child|brother|sister|publisher|editor|"
    "cinematographer|singer|architect|designer|presenter|owner|painter|sculptor|mayor|inventor|teacher|translator"
)
_KINDS = "film|movie|song|album|novel|book|play|poem|opera|painting|series|show|game|band|company"
# "the director of film X", "director of X": the relation, its kind word, then the object
# (without "the" only after "of": "the cause of death of director of film X", not "This singer of X")
_CHAIN = re.compile(
    rf"(?:\bthe\s+|(?<=\bof\s))(?P<rel>{_RELATIONS})\s+of\s+(?:(?P<kind>{_KINDS})\s+)?(?=[A-Z0-9]|#q\d|the\s+[A-Z])"
)
# "the company that built the Thornlace Lighthouse": a thing named by what it did to a name; its
# verb in the past (or a few common irregular ones), so "the film that stars X" stays with the LLM
_RELATIVE = re.compile(
    rf"\bthe\s+(?P<kind>{_KINDS})\s+(?:that|which)\s+(?P<verb>[a-z]+ed|built|made|wrote|won|bought|sold|ran|held)\s+"
    r"(?=[A-Z0-9]|the\s+[A-Z])"
)
_POSSESSIVE = re.compile(rf"\s*'s\s+(?P<rel>{_RELATIONS})\b")
_GRAND = re.compile(r"\b(?:the\s+)?(?P<side>paternal|maternal)\s+grand(?P<who>father|mother)\s+of\s+(?=[A-Z])")
_TWO_OPTIONS = re.compile(r"^(?P<head>[^,]+),\s*(?P<a>.+?)\s+or\s+(?P<b>.+?)\s*\?$")
# the words that make a two-option question ask for the earlier or the later date (also read by
# the logic route's computed comparison, engine/core/routes/logic/compare.py)
EARLY = re.compile(r"\b(older|oldest|first|earlier|earliest|before)\b", re.I)
LATE = re.compile(r"\b(younger|youngest|later|latest|last|recently|recent|newer|after)\b", re.I)
_SAME = re.compile(
    r"\s+(?:have the (?:\w+) that\s+)?(?:were\s+|are\s+)?"
    r"(?P<how>from|of|located in|based in|share|have)(?: the)? same (?P<attr>country|nationality)\s*\?$",
    re.I,
)
_CONNECTORS = {"of", "de", "von", "van", "der", "the", "and", "la", "le", "du", "da", "di"}


def form_plan(question: str) -> tuple[str, list[str]] | None:
    """(the form's name, its sub-questions: #qN names the N-th one's answer) when the question
    has one of the forms above, else None."""
    q = " ".join(question.split())
    for name, reader in (("date comparison", _date_comparison), ("same check", _same_check), ("chain", _chain)):
        texts = reader(q)
        if texts and len(texts) >= 2:
            return name, texts
    return None


def _date_asked(head: str) -> str | None:
    """The question a date comparison asks of each option ("{}" for it), from its head."""
    if re.search(r"\b(died|die|death)\b", head, re.I):
        return "When did {} die?"
    if re.search(r"\b(born|older|younger|oldest|youngest)\b", head, re.I):
        return "When was {} born?"
    if re.search(r"\b(released|came out|come out|premiered)\b", head, re.I):
        return "When was {} released?"
    if re.search(r"\b(published|written)\b", head, re.I):
        return "When was {} published?"
    if re.search(r"\b(founded|established|formed)\b", head, re.I):
        return "When was {} founded?"
    return None


def _date_comparison(q: str) -> list[str] | None:
    m = _TWO_OPTIONS.match(q)
    if not m or " or " in f"{m['a']} {m['b']}" or bool(EARLY.search(m["head"])) == bool(LATE.search(m["head"])):
        return None
    asked = _date_asked(m["head"])
    if asked is None or re.search(r"\b(their|its|his|her)\b", m["head"], re.I):  # "released their first album"
        return None
    options = [m["a"].strip(), m["b"].strip()]
    rel = re.search(rf"\b(?:the\s+|whose\s+)(?P<rel>{_RELATIONS})\b", m["head"])
    if not rel:
        described = [re.match(rf"^the\s+(?P<rel>{_RELATIONS})\s+of\s+(?P<e>.+)$", o) for o in options]
        if all(described):  # "Who died first, the painter of A or the author of B?"
            return [
                *(f"Who is the {d['rel']} of {d['e']}?" for d in described),
                asked.format("#q1"),
                asked.format("#q2"),
            ]
        if any(described) or any(_UNRESOLVED.search(o) for o in options):
            return None
        return [asked.format(o) for o in options]  # "Who was born first, A or B?": the options themselves
    kind = re.match(rf"^which\s+(?P<kind>{_KINDS})\b", m["head"], re.I)
    of = f"{kind['kind'].lower()} " if kind else ""
    return [
        *(f"Who is the {rel['rel']} of {of}{o}?" for o in options),
        asked.format("#q1"),
        asked.format("#q2"),
    ]


def _same_check(q: str) -> list[str] | None:
    m = _SAME.search(q)
    lead = re.match(r"^(?:were|are|do|does|did|is|was)\s+(?:both\s+)?", q, re.I)
    if not m or not lead:
        return None
    middle = q[lead.end() : m.start()].strip(" ,")
    middle = re.sub(r"^[a-z]+,\s*", "", middle)  # "villages, Stanari and ..."
    shared = re.match(rf"^(?:the\s+)?(?P<rel>{_RELATIONS})s?\s+of\s+(?:both\s+)?(?:(?P<kind>{_KINDS})s?\s+)?", middle)
    rel, kind = (shared["rel"], shared["kind"]) if shared else (None, None)
    if shared:  # "director of film A and director of film B" repeats it: drop it from both
        middle = middle[shared.end() :]
    elif re.match(rf"^(?P<kind>{_KINDS})s\s+", middle) and re.search(r"\bhave the \w+ that", q):
        # "Do both films A and B have the directors that share ...": the relation comes after
        kind = re.match(rf"^(?P<kind>{_KINDS})s\s+", middle)["kind"]
        rel = re.search(r"\bhave the (\w+?)s? that", q)[1]
        middle = re.sub(rf"^{kind}s\s+", "", middle)
    sides = middle.split(" and ")
    if rel is not None:
        sides = [re.sub(rf"^(?:the\s+)?{rel}s?\s+of\s+(?:{_KINDS})?\s*", "", s) for s in sides]
    if len(sides) != 2 or not all(sides):
        return None
    attr, how = m["attr"].lower(), m["how"].lower()
    asked = (
        "What is the nationality of {}?"
        if attr == "nationality"
        else ("Which country is {} located in?" if how in ("located in", "based in") else "Which country is {} from?")
    )
    if rel is None:
        per_side = [
            re.match(rf"^(?:the\s+)?(?P<rel>{_RELATIONS})\s+of\s+(?:(?P<kind>{_KINDS})\s+)?(?P<e>.+)$", s)
            for s in sides
        ]
        if all(per_side):  # "director of film A and director of film B"
            return [
                *(f"Who is the {p['rel']} of {(p['kind'] + ' ') if p['kind'] else ''}{p['e']}?" for p in per_side),
                asked.format("#q1"),
                asked.format("#q2"),
            ]
        return [asked.format(s.strip(" ,")) for s in sides]
    of = f"{kind} " if kind else ""
    return [*(f"Who is the {rel} of {of}{s.strip(' ,')}?" for s in sides), asked.format("#q1"), asked.format("#q2")]


def _chain(q: str) -> list[str] | None:
    """Innermost relation first: each hop's phrase becomes #qN in the rest of the question, and
    what is left must be one short question about #qN (no second clause: MuSiQue's "the city
    where #q1 died" stays with the LLM)."""
    texts: list[str] = []
    rest = q
    for _ in range(3):
        hop = _one_hop(rest, f"#q{len(texts) + 1}")
        if hop is None or _bare(hop[1]):  # "Who is the child of #q1?" is the last question itself
            break
        sub, rest = hop
        texts.append(sub)
    if (
        not texts
        or not rest.endswith("?")
        or rest.count("#q") != 1
        or _bare(rest)
        or not _short(rest)
        or _UNRESOLVED.search(rest)  # "Is the founder of A older than #q1?": a second chain left over
    ):
        return None
    return [*texts, rest]


def _bare(rest: str) -> bool:
    """ "Who is #q1?": the chain was the whole question, a single lookup."""
    return set(re.findall(r"[a-z]+", re.sub(r"#q\d+", "", rest).lower())) <= {"who", "what", "is", "was", "are", "were"}


_PREPOSITIONS = {"in", "on", "at", "for", "from", "by", "to", "with", "of", "during"}
_UNRESOLVED = re.compile(rf"\bthe\s+(?:{_RELATIONS})\s+of\s+(?!#q)|\bthan\b")  # lower case: titles are capitalised
_CLAUSE = {"where", "that", "which", "who", "whose", "whom", "when", "while", "along", "after", "before"}


def _short(rest: str) -> bool:
    """One question about one thing: at most 8 words beside the reference, no comma, no
    clause word after the first word."""
    words = re.sub(r"#q\d+('s)?", " ", rest).replace("?", " ").split()
    lead = 2 if words and words[0].lower() in _PREPOSITIONS else 1  # "In which country was #q1 born?"
    return "," not in rest and len(words) <= 8 and not {w.lower() for w in words[lead:]} & _CLAUSE


_NAME_WORDS = _CONNECTORS | {"a", "an", "in", "on", "at", "to", "for", "from", "with", "del", "y", "is", "it"}


def _is_name(obj: str) -> bool:
    """Every word capitalised, a number, bracketed, or a connector ("The Man From The Diners'
    Club", "Devotion (1929 Film)"); a lower-case content word means the name's end is unknown."""
    words = obj.split()
    if not words or "#" in obj or re.search(r"['’]s$", obj):  # "Prince William's (children)"
        return False
    if words[0] == "the" and len(words) > 1:  # "the Fennick Observatory"
        words = words[1:]
    return not words[0][:1].islower() and all(
        w[:1].isupper() or w[:1].isdigit() or not w[:1].isalpha() or "(" in w or ")" in w or w.lower() in _NAME_WORDS
        for w in words
    )


def _one_hop(q: str, ref: str) -> tuple[str, str] | None:
    """(the innermost hop's question, q with that hop's phrase replaced by `ref`), or None."""
    grand = _GRAND.search(q)
    if grand:
        obj_end = _object_end(q, grand.end())
        obj = q[grand.end() : obj_end]
        first = "father" if grand["side"] == "paternal" else "mother"
        rest = q[: grand.start()] + f"the {grand['who']} of {ref}" + q[obj_end:]
        return (f"Who is the {first} of {obj}?", rest) if _is_name(obj) else None
    chains, poss = list(_CHAIN.finditer(q)), _POSSESSIVE.search(q)
    poss_start = _object_start(q, poss.start()) if poss else -1
    if chains and not (poss and poss_start >= chains[-1].end()):  # "the father of X's husband": X's first
        c = chains[-1]
        earlier = re.match(r"#q\d+", q[c.end() :])  # "the wife of #q1 in ...": an earlier hop's answer
        obj_end = c.end() + earlier.end() if earlier else _object_end(q, c.end())
        obj = q[c.end() : obj_end]
        kind = f"{c['kind']} " if c["kind"] else ""
        if not (earlier or (_is_name(obj) and _verb_follows(q[obj_end:]))):
            return None
        return f"Who is the {c['rel']} of {kind}{obj}?", q[: c.start()] + ref + q[obj_end:]
    if poss:
        obj = q[poss_start : poss.start()]
        return (
            (f"Who is the {poss['rel']} of {obj}?", q[:poss_start] + ref + q[poss.end() :]) if _is_name(obj) else None
        )
    relative = _RELATIVE.search(q)
    if relative:
        obj_end = _object_end(q, relative.end())
        obj = q[relative.end() : obj_end]
        if not (_is_name(obj) and _verb_follows(q[obj_end:])):
            return None
        return f"Which {relative['kind']} {relative['verb']} {obj}?", q[: relative.start()] + ref + q[obj_end:]
    return None


_TAIL_VERBS = {
    *[
        "born",
        "die",
        "died",
        "live",
        "lived",
        "study",
        "studied",
        "attend",
        "attended",
        "graduate",
        "graduated",
        "work",
        "worked",
        "play",
        "played",
    ],
    *[
        "is",
        "was",
        "are",
        "were",
        "located",
        "based",
        "buried",
        "marry",
        "married",
        "coach",
        "coached",
        "teach",
        "taught",
        "win",
        "won",
        "hold",
        "held",
    ],
}


def _verb_follows(tail: str) -> bool:
    """After a name, the question ends or goes on with its verb ("... King Of The Sierras born?");
    a noun there ("the Harry Potter books") means the name's end was misread."""
    words = tail.strip(" ?").split()
    return not words or words[0] in _TAIL_VERBS or words[0].startswith("'")


def _object_end(q: str, start: int) -> int:
    """Where a named object that begins at `start` ends: before the question's closing run of
    lower-case words ("... King Of The Sierras born?" -> before " born"), or before "?"."""
    end = len(q.rstrip("?").rstrip())
    words = list(re.finditer(r"\S+", q[start:end]))
    cut = end
    for w in reversed(words):
        text = w.group().strip(",")
        if (text[:1].islower() or text.startswith("'")) and ")" not in text:
            cut = start + w.start()
            continue
        break
    return len(q[:cut].rstrip(" ,"))


def _object_start(q: str, end: int) -> int:
    """Where a name that ends at `end` begins: back over capitalised words and their connectors
    ("the place of death of Isabel Moctezuma's" -> "Isabel Moctezuma")."""
    words = list(re.finditer(r"\S+", q[:end]))
    start = end
    for w in reversed(words):
        if w.group()[:1].isupper() or w.group()[:1].isdigit() or w.group().lower() in _CONNECTORS:
            start = w.start()
            continue
        break
    while True:  # no connector at the front ("of Isabel" -> "Isabel")
        first = q[start:end].split(" ", 1)
        if len(first) == 2 and first[0].lower() in _CONNECTORS and not first[0][:1].isupper():
            start += len(first[0]) + 1
            continue
        return start
