"""The form of a question, read without any model: what a router can learn that carries over
from one topic to another.

Three views, all deterministic (regular expressions and word lists, no LLM, no embedder):

- `mask_entities(q)`: the question with its topic removed: quoted titles and capitalised
  spans after the first word become "X", numbers and dates "N" ("Who was born first, Ann Lee
  or Tom Ford?" -> "Who was born first, X or X?"). The router can embed this text instead of
  the question (RouterConfig.text_form = "masked").
- the count_* functions and `chain_depth`: the structures that make a question need more than
  one retrieval: dates, other numbers, the depth of nested relation chains ("the mother of the
  director of X" = 2), comparative and superlative operators, named entities, lookups, and the
  question word. router.features turns them into input columns.
- `answer_shape(q)`: what the answer is to be, a list of items, an explanation or one value.
  The summary route answers a list over a whole corpus, and "not in the documents" weighs
  differently for a list than for one value (engine.core.absence).

Only the standard library: importing this is free.
"""

from __future__ import annotations

import re


def _wordset(words: str) -> frozenset[str]:
    return frozenset(words.split())


# Question words, in the order of the router's one-hot; "yesno" = starts with an auxiliary verb
# (Is/Was/Did/...): comparison and verification questions often do.
QWORDS = ("what", "who", "when", "where", "which", "why", "how", "yesno")
AUXILIARIES = _wordset("is are was were do does did has have had can could will would should")
_TOKEN = re.compile(r"[A-Za-z0-9][\w'\-\.]*")


def normalize_question(text: str) -> str:
    """The one text form embedded at train and serve time: stripped, whitespace collapsed."""
    return " ".join(str(text).split())


_END_MARKS = re.compile(r"[\s?!.]+$")


def unpunctuated(text: str) -> str:
    """The question without its closing marks ("?", "!", "."): data sets differ in how they end a
    question, and a router that sees the mark learns the set, not the question."""
    return _END_MARKS.sub("", normalize_question(text))


def tokens(q: str) -> list[str]:
    """Word tokens (letters, digits, inner ' - .), punctuation dropped."""
    return _TOKEN.findall(q)


def question_word(q: str) -> str:
    """One of QWORDS, or "other": "yesno" when the first word is an auxiliary verb, else the
    first question word among the first three words ("In which year ..." -> "which")."""
    words = [w.lower() for w in tokens(q)[:3]]
    if words and words[0] in AUXILIARIES:
        return "yesno"
    return next((w for w in words if w in QWORDS), "other")


# ---------------------------------------------------------------- masking (the topic removed)

QUOTED = re.compile(r"\"[^\"]+\"|“[^”]+”")
# An entity to mask: capitalized tokens joined by up to two short connectors ("The Lord of the
# Rings"), but not by "and" (two names stay two) and without a possessive "'s" (kept as a relation).
_NAME_TOKEN = r"[A-Z0-9][\w\-\.]*(?:'(?!s\b)\w+)*"
_MASK_SPAN = re.compile(rf"{_NAME_TOKEN}(?:\s+(?:(?:of|the|de|la|von|van)\s+){{0,2}}{_NAME_TOKEN})*")
_NUMBER = re.compile(r"\b\d[\d,.:/-]*\b")


def mask_entities(text: str) -> str:
    """The question's form without its topic: quoted titles and capitalized spans after the first
    word become "X", numbers and dates "N". "Who was born first, Ann Lee or Tom Ford?" ->
    "Who was born first, X or X?"."""
    q = normalize_question(text)
    q = QUOTED.sub("X", q)
    head, sep, body = q.partition(" ")
    body = _MASK_SPAN.sub(lambda m: "N" if m.group(0)[0].isdigit() else "X", body)
    return _NUMBER.sub("N", head + sep + body)


def entity_spans(text: str) -> list[str]:
    """The names mask_entities would replace, as written: quoted titles (without their quotes)
    and capitalized spans after the first word, numbers left out."""
    q = normalize_question(text)
    quoted = [m.group(0)[1:-1] for m in QUOTED.finditer(q)]
    body = QUOTED.sub(" ", q).partition(" ")[2]
    return quoted + [m.group(0) for m in _MASK_SPAN.finditer(body) if not m.group(0)[0].isdigit()]


# ---------------------------------------------------------------- dates and numbers

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
    r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
# One date each, longest forms first: "March 3, 1990", "3 March 1990", "March 1990", "1990-03-03",
# "3/4/1990", "the 1990s", "'90s", "19th century", and a bare year from 1000 to 2099.
_DATE = re.compile(
    rf"\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}(?:,?\s+\d{{4}})?\b"
    rf"|\b{_MONTH}\s+\d{{4}}\b"
    r"|\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    r"|\b(?:1[0-9]|20)\d0s\b|'\d0s\b"
    r"|\b\d{1,2}(?:st|nd|rd|th)\s+century\b"
    r"|\b(?:1[0-9]|20)\d{2}\b"
)
# Numbers that are not dates: digits (1,200  3.5  42nd), the number words two to twelve ("which of
# the two films") and hundred ... billion; "one" is left out: "one of", "the one where" are no numbers.
_OTHER_NUMBER = re.compile(
    r"\b\d[\d,]*(?:\.\d+)?(?:st|nd|rd|th)?\b"
    r"|\b(?:two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|hundred|thousand|million|billion)\b",
    re.IGNORECASE,
)


def count_dates(q: str) -> int:
    """Dates in the question: full dates, month + year, decades, centuries, years 1000-2099."""
    return len(_DATE.findall(q))


def count_numbers(q: str) -> int:
    """Numbers that are not part of a date (digits, number words from two to twelve, hundred ... billion)."""
    return len(_OTHER_NUMBER.findall(_DATE.sub(" ", q)))


# ---------------------------------------------------------------- comparison operators

COMPARATIVES = _wordset(
    "older younger earlier later sooner longer shorter taller higher lower larger smaller bigger "
    "greater fewer less more farther further closer nearer heavier lighter faster slower richer "
    "poorer wider narrower deeper hotter colder warmer cooler newer better worse "
    "than same both either neither compared comparison versus vs between differ different "
    "difference alike"
)
SUPERLATIVE_WORDS = _wordset("first last most least best worst")
# Lowercase words in -est that are not superlatives (capitalised ones are names: "Everest").
_NOT_SUPERLATIVE = _wordset(
    "interest forest west midwest northwest southwest test contest protest rest unrest request "
    "guest nest harvest honest dishonest modest arrest suggest manifest digest quest conquest "
    "chest priest pest vest crest invest behest earnest inquest bequest detest attest divest "
    "infest ingest congest molest jest zest lest"
)
_EST = re.compile(r"^[a-z]{2,}est$")


def _word(token: str) -> str:
    return token.lower().rstrip(".'")


def count_comparatives(q: str) -> int:
    """Comparison operators: comparative adjectives (older, earlier, more, ...), "than",
    "same", "both", "either", "between", "compared", ... each occurrence once."""
    return sum(1 for t in tokens(q) if _word(t) in COMPARATIVES)


def count_superlatives(q: str) -> int:
    """Superlative operators: words in -est (oldest, earliest, largest), and first, last, most,
    least, best, worst; lowercase only after the first word ("Best Picture" is a name)."""
    toks = tokens(q)
    return sum(1 for i, t in enumerate(toks) if (i == 0 or t[0].islower()) and is_superlative(_word(t)))


def is_superlative(word: str) -> bool:
    """A lowercase word that is a superlative operator."""
    return word in SUPERLATIVE_WORDS or (bool(_EST.match(word)) and word not in _NOT_SUPERLATIVE)


# ---------------------------------------------------------------- relation chains

# A clause boundary: a relation chain does not run across a comma, a coordination or a
# comparison ("the founder of X or the founder of Y" is two chains of depth 1, not one of 2).
_CLAUSE = re.compile(r"[,;:?!()]|\b(?:or|and|than|but|while|whereas|versus|vs)\b", re.IGNORECASE)
_LINK = re.compile(r"\b(\w+)\s+of\b|['’]s\b|(?<=[sX])['’](?=\s)", re.IGNORECASE)
# "of" after these words is a quantity or a choice, not a relation: "which of the two", "one of"
# (nor after a superlative: "the oldest of the three").
_NOT_A_RELATION = _wordset(
    "which what who one some all both each any none either neither most many much few several "
    "out instead because kind sort type terms"
)


def _is_link(word_before_of: str) -> bool:
    return word_before_of not in _NOT_A_RELATION and not is_superlative(word_before_of)


def chain_depth(q: str) -> int:
    """The longest nested relation chain within one clause of the masked question: each "of"
    after a noun and each possessive "'s" is one link. "the capital of X" = 1, "the nationality
    of the director of the film X" = 2, "X's father's birthplace" = 2, "the founder of X or the
    founder of X" = 1 (two chains). Names holding "of" ("University of X") are one masked X."""
    depth = 0
    for clause in _CLAUSE.split(mask_entities(q)):
        links = sum(1 for m in _LINK.finditer(clause) if _is_link((m.group(1) or "").lower()))
        depth = max(depth, links)
    return depth


# ---------------------------------------------------------------- lookups

# "Who is <the relation chain>?": the question asks who or what the chain's end is, so the chain's
# links are all the lookups ("Who is the director of X?" = 1, "What is the nationality of the
# director of X?" = 2); any other question asks one fact more of what it names ("Where was the
# director of X born?" = 2, "When was X born?" = 1).
_IDENTITY = re.compile(r"^(?:who|what)\s+(?:is|was|are|were)\s+\S", re.IGNORECASE)
# A relative clause describing an entity ("the mayor who opened X", "the country where X is"):
# finding that entity is a lookup of its own. After the question's first two words.
_RELATIVE_CLAUSE = re.compile(r"\b[\w']+\s+(?:that|who|whom|whose|which|where)\s+\w+", re.IGNORECASE)
_CHOICE = re.compile(r"\bX\b[^?]{0,40}?\b(?:or|and)\b[^?]{0,40}?\bX\b")
MAX_LOOKUPS = 4


def count_lookups(text: str) -> int:
    """Retrievals the question needs, read from its form alone (1 to MAX_LOOKUPS): one per link of
    its relation chain and one per relative clause describing an entity ("Who succeeded the mayor
    who opened X?" = 2), one more for the fact asked unless the question asks who or what the
    chain's end is, and one per named entity compared ("Who was born first, X or Y?" = 2). A
    lookup such as "When was X born?" or "Who is the director of X?" is 1."""
    q = normalize_question(text)
    depth = chain_depth(q)
    relatives = len(_RELATIVE_CLAUSE.findall(" ".join(q.split()[2:])))
    n = depth + relatives + (0 if depth and _IDENTITY.match(q) else 1)
    masked = mask_entities(q)
    if (count_comparatives(q) or count_superlatives(q)) and _CHOICE.search(masked):
        n = max(n, count_entities(q))
    return max(1, min(n, MAX_LOOKUPS))


def count_entities(q: str) -> int:
    """Named entities: the X placeholders of the masked question (quoted titles, capitalised
    spans after the first word; "Ann Lee and Tom Ford" is two; dates such as "May 5" are none)."""
    return len(re.findall(r"\bX\b", mask_entities(_DATE.sub("0", q))))  # "May 5" is a date, not a name


# ---------------------------------------------------------------- the shape of the answer asked for

# "Which config options ...", "What biopsy types are ...": the question word, up to three words of
# the noun phrase (no preposition, auxiliary or participle inside it), then a plural head noun.
_NP_WORD = (
    r"(?!(?:of|in|on|for|from|to|by|with|about|is|are|was|were|do|does|did|has|have|had|can|could|may|might|"
    r"must|shall|should|will|would)\b|\w+ed\b|\w+n't\b)[\w\-\.`']+\s+"
)
_LIST_HEAD = re.compile(
    rf"^(?:which|what)\s+(?:{_NP_WORD}){{0,3}}?(?P<head>(?-i:[a-z])[\w\-]*[a-z]s)\b(?P<after>\W+\S+)?",
    re.IGNORECASE,
)
_SINGULAR_S = re.compile(r"(?:ss|us|is|ics|news|series|species)$", re.IGNORECASE)
_NOT_NOUNS = _wordset(
    "was has does this its his hers yes always perhaps thus besides across towards afterwards whereas"
)
# What follows a plural head noun ("Which options does ...", "What biopsy types are used ...") and
# not the verb of a singular subject ("Which office sells tickets ...", "Which option makes npm ..."):
# an auxiliary, a preposition, a conjunction, a relative word, a participle, a comma or the end.
_AFTER_A_PLURAL = AUXILIARIES | _wordset(
    "may might must shall besides of in on for from to by with about within among across at and or but "
    "that which who whose whom"
)
# An -s word that reads as the verb of a singular subject ("Which option makes npm ...") is no head.
_VERBS_S = _wordset(
    "makes runs means explains tells checks lets shows compares prints profiles connects controls returns "
    "holds gives takes causes uses contains provides allows requires needs reports writes reads sets gets "
    "includes supports creates starts stops keeps leads plays occurs happens works produces defines "
    "describes states says marks calls handles stores sends lists documents becomes remains appears seems "
    "follows belongs refers applies affects determines decides enables prevents distinguishes argues "
    "drives involves results matters sells buys owns lives comes goes"
)
_NOT_HEADS = _NOT_NOUNS | _VERBS_S
_AFTER_A_VERB = _wordset("the a an both its their his her my your our me us it them where when whether why how")
_LIST_OPENERS = re.compile(
    r"^(?:list|name\s+(?:all|every)|enumerate|give\s+(?:me\s+)?(?:a\s+list|all|every))\b"
    r"|^(?:what|which)\s+(?:are|were)\s+(?:the\s+)?(?:[\w\-]+\s+){0,3}?[a-z][\w\-]*[a-z]s\b"
    r"|^(?:what|which)\s+(?:kinds|types|sorts)\s+of\b",
    re.IGNORECASE,
)
_EXPLANATION = re.compile(
    r"^(?:why|explain|describe|compare|discuss|summari[sz]e|outline)\b"
    r"|^how\s+(?:does|do|did|is|are|was|were)\s+(?!(?:i|we|you|one)\b)"
    r"|^(?:what|which)\s+(?:\w+\s+){0,2}?(?:evidence|role|purpose|significance|mechanisms?|relationship|"
    r"differences?|impact|effects?|implications?|rationale|advantages?|benefits?|challenges?)\b"
    r"|\bdiffers?\b",
    re.IGNORECASE,
)
ANSWER_SHAPES = ("value", "list", "explanation")


def _plural_head(q: str) -> bool:
    m = _LIST_HEAD.match(q)
    head = m.group("head") if m else ""
    if not head or _SINGULAR_S.search(head) or head.lower() in _NOT_HEADS:
        return False
    after = m.group("after") or ""
    word = (tokens(after) or [""])[0].lower()
    if not word or after.lstrip()[:1] in (",", "'") or word in _AFTER_A_PLURAL or word.endswith("ed"):
        return True
    # a base verb agrees with a plural head ("Which commands take ..."); an object after a verb of
    # a singular subject is most often a determiner, a pronoun or a plural noun ("sells tickets")
    return not word.endswith("s") and word not in _AFTER_A_VERB


def answer_shape(text: str) -> str:
    """What kind of answer the question asks for, read from its form: "list" (a set of items
    spread over the documents: "Which config options does npm audit take?", "What are the main
    risk factors of X?"), "explanation" (a reasoned text: "Why ...", "How does X differ from
    Y?", "What evidence supports ...") or "value" (one fact: a number, a name, a place, a step:
    "What is the default timeout?", "Which flag makes npm save exact versions?", "How do I ...?")."""
    q = normalize_question(text)
    if _LIST_OPENERS.search(q) or _plural_head(q):
        return "list"
    if _EXPLANATION.search(q):
        return "explanation"
    return "value"
