"""Question-answering data sets, read in their original public formats.

`load_dataset(path, n=None, offset=0, corpus=None)` detects the format from the file name
and the first record's keys, takes questions [offset, offset+n) and returns a `Dataset` whose
passages are the union of those questions' passages (deduplicated, first-seen order).
A benchmark corpus is exactly that union, so every question competes with the
distractors of every other question taken. A corpus-format set (graphrag) has no passages
per question: all its questions share one corpus file, and the Dataset's passages are that
corpus cut into passages (hierarchy.data_files), whatever questions are taken.

Supported formats (FORMATS; "generic" files take their file stem as name, graphrag ones
graphrag_<source>):

- ``hotpotqa`` (IRCoT processed JSONL, e.g. hotpotqa_dev500.jsonl): question_id,
  question_text, answers_objects[].spans, contexts[{id,title,paragraph_text,is_supporting}].
  Type is None (IRCoT drops HotpotQA's bridge/comparison label). IRCoT files of 2Wiki or
  MuSiQue are named from the file name and get a hop label when the id carries one.
- ``2wiki`` (raw 2WikiMultihopQA JSON array) and ``hotpotqa`` (raw HotpotQA JSON array):
  _id, type, question, answer, context[[title,[sentences]]], supporting_facts[[title,i]].
  context/supporting_facts/evidences may be strings holding Python literals. A file is
  2Wiki when records carry `evidences` (HotpotQA has none).
- ``musique`` (raw MuSiQue-Ans JSONL, or a JSON array of the same records): id, question,
  answer, answer_aliases, paragraphs[{idx,title,paragraph_text,is_supporting}];
  type = hop label from the id prefix ("2hop", "3hop", "4hop").
- ``nq`` (NQ-open oracle, gzipped JSONL): question, answers[], ctxs[{title,text,isgold}];
  id = "nq-<0-based line index>", type "single", supporting = gold ctxs.
- ``squad`` (SQuAD v1.1 JSON): data[].title, data[].paragraphs[].context/qas[]; one
  passage per paragraph titled with its article; type "single".
- ``graphrag`` (GraphRAG-Bench): a questions JSON array {id, source, question, answer,
  question_type} (answers are sentences; type = question_type, e.g. "Contextual Summarize")
  plus a corpus JSON array [{corpus_name, context}]: the `corpus` argument, else the
  `*_corpus.json` beside the questions file. Named "graphrag_<source>", e.g. graphrag_medical.
- generic JSONL (named after the file stem): {id, question, answers[], type?,
  passages[{title, text, supporting?}]}; without passages ({question, answers[]} or
  {question, answer}): a user's questions over a KB they already have.

Files may be .json or .jsonl, optionally gzipped (.gz). Errors: an unrecognised file
raises `UnknownFormatError`; a malformed JSON line or record raises `DataFormatError`
naming the file and line (record index for JSON arrays). Any malformed line refuses the
whole load, even outside the slice taken: nothing partial is ever returned.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.floor.base.errors import DataFormatError, LogicRouteError, UnknownFormatError
from engine.floor.base.files import content_hash
from hierarchy.data_files import corpus_texts, find_corpus, parse_records, read_text

FORMATS: dict[str, str] = {
    "hotpotqa": "IRCoT JSONL (question_id, question_text, answers_objects, contexts) "
    "or raw HotpotQA JSON (_id, question, answer, context, supporting_facts)",
    "2wiki": "raw 2WikiMultihopQA JSON (_id, type, question, answer, context, supporting_facts, evidences)",
    "musique": "raw MuSiQue JSONL/JSON (id, question, answer, answer_aliases, paragraphs)",
    "nq": "NQ-open oracle JSONL(.gz) (question, answers, ctxs)",
    "squad": "SQuAD v1.1 JSON (data[].paragraphs[].context/qas)",
    "graphrag": "GraphRAG-Bench questions JSON (id, source, question, answer, question_type) "
    "beside its corpus JSON (corpus_name, context)",
    "generic": "JSONL {id?, question, answers[] (or answer), type?, passages[{title, text, supporting?}]?}",
}

# Where the benchmark files live under shared/data (see its README).
SHARED_FILES: dict[str, str] = {
    "hotpotqa": "hotpotqa/hotpotqa_dev500.jsonl",
    "2wiki": "2wikimultihopqa/2wiki_train500.json",
    "musique": "musique/musique_200.jsonl",
    "nq": "nq/nq_open_oracle_2655.jsonl.gz",
    "squad": "squad/squad_v1.1_dev.json",
    "medical": "graphrag_bench/medical_questions_dev.json",
}


def shared_data_dir() -> Path:
    """$LOGICROUTE_DATA_DIR, else shared/data beside the repository (its parent's shared/data)."""
    env = os.environ.get("LOGICROUTE_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "shared" / "data"


def resolve_data(arg: str | Path) -> str:
    """A data file path, or a shared data set name (hotpotqa, 2wiki, musique, nq, squad, medical)."""
    if Path(arg).exists():
        return str(arg)
    if arg in SHARED_FILES:
        p = shared_data_dir() / SHARED_FILES[str(arg)]
        if p.is_file():
            return str(p)
        raise LogicRouteError(f"data set {arg!r}: {p} not found (set LOGICROUTE_DATA_DIR)")
    raise LogicRouteError(f"{arg}: no such data file (or a name: {', '.join(SHARED_FILES)})")


@dataclass
class Question:
    id: str
    text: str
    answers: list[str]
    type: str | None
    supporting: list[str]  # ids of supporting passages
    dataset: str
    passages: list[str] = field(default_factory=list)  # ids of every passage the question came with


@dataclass
class Passage:
    id: str
    title: str
    text: str


@dataclass
class Dataset:
    name: str
    questions: list[Question]
    passages: list[Passage] = field(default_factory=list)
    corpus: str | None = None  # the shared corpus file the passages were cut from (graphrag sets)


def passage_id(title: str, text: str) -> str:
    """Stable short content hash: identical passages of different questions share an id."""
    # The separator keeps ("ab", "c") and ("a", "bc") apart.
    return content_hash(f"{title}\x1f{text}")[:16]


def load_dataset(path: str | Path, n: int | None = None, offset: int = 0, corpus: str | Path | None = None) -> Dataset:
    """Load questions [offset, offset+n) of a QA file in any supported format (see module doc).
    `corpus` names the corpus file of a graphrag set; formats whose questions carry their own
    passages ignore it (Dataset.corpus stays None)."""
    path = Path(path)
    if n is not None and n < 0:
        raise ValueError(f"n must be >= 0 or None, got {n}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if not path.is_file():
        raise LogicRouteError(f"{path}: no such data file")

    inner = path.name[:-3] if path.name.endswith(".gz") else path.name
    suffix = Path(inner).suffix.lower()
    if suffix not in (".json", ".jsonl"):
        raise UnknownFormatError(_unknown(path, f"extension {suffix or '(none)'!r}"))

    text = read_text(path)
    # records: (location for messages, raw dict); squad yields its own single record.
    records = parse_records(path, text, prefer_lines=(suffix == ".jsonl"))
    if not records:
        raise DataFormatError(f"{path}: no records")
    first_loc, first = records[0]
    if not isinstance(first, dict):
        raise UnknownFormatError(_unknown(path, f"first record is a {type(first).__name__}"))

    name, convert = _detect(path, first)
    stop = None if n is None else offset + n
    questions: list[Question] = []
    passages: dict[str, Passage] = {}
    for loc, raw, qi in _question_records(path, name, records, offset, stop):
        try:
            q, ps = convert(raw, name, qi)
        except DataFormatError:
            raise
        except (KeyError, TypeError, ValueError, SyntaxError, AttributeError, IndexError) as e:
            raise DataFormatError(f"{path}:{loc}: malformed {name} record ({type(e).__name__}: {e})") from None
        q.passages = [p.id for p in ps]
        questions.append(q)
        for p in ps:
            passages.setdefault(p.id, p)
    ds = Dataset(name=name, questions=questions, passages=list(passages.values()))
    return _with_corpus(ds, find_corpus(path, corpus)) if convert is _from_graphrag else ds


def _with_corpus(ds: Dataset, corpus: Path) -> Dataset:
    """Every question of a corpus-format set comes with the whole corpus as its passages."""
    passages: dict[str, Passage] = {}
    for title, text in corpus_texts(corpus):
        p = Passage(passage_id(title, text), title, text)
        passages.setdefault(p.id, p)
    for q in ds.questions:
        q.passages = list(passages)
    ds.passages, ds.corpus = list(passages.values()), str(corpus)
    return ds


# ---------------------------------------------------------------- detecting


def _unknown(path: Path, why: str) -> str:
    return f"{path}: unknown data format ({why}). Supported: " + "; ".join(f"{k}: {v}" for k, v in FORMATS.items())


Converter = Callable[[dict, str, int], "tuple[Question, list[Passage]]"]


def _detect(path: Path, r: dict) -> tuple[str, Converter]:
    keys = set(r)
    if "data" in keys and isinstance(r["data"], list):
        return "squad", _from_squad_paragraph
    if {"question_text", "contexts"} <= keys:
        low = path.name.lower()
        name = "2wiki" if "2wiki" in low else "musique" if "musique" in low else "hotpotqa"
        return name, _from_ircot
    if {"question", "answer", "context", "supporting_facts"} <= keys:
        return ("2wiki" if "evidences" in keys else "hotpotqa"), _from_hotpot_raw
    if {"question", "answer", "paragraphs"} <= keys:
        return "musique", _from_musique
    if {"question", "answers", "ctxs"} <= keys:
        return "nq", _from_nq
    if {"question", "answer", "question_type"} <= keys:
        source = str(r.get("source") or "").lower()
        return (f"graphrag_{source}" if re.fullmatch(r"\w+", source) else "graphrag"), _from_graphrag
    if {"question", "answers", "passages"} <= keys:
        return path.name.split(".")[0], _from_generic
    if {"question", "answers"} <= keys or {"question", "answer"} <= keys:  # a user's questions over their KB
        return path.name.split(".")[0], _from_generic
    raise UnknownFormatError(_unknown(path, f"first record keys {sorted(keys)[:12]}"))


def _question_records(
    path: Path, name: str, records: list[tuple[str, Any]], start: int, stop: int | None
) -> Iterator[tuple[str, Any, int]]:
    """Yield (location, raw, question index) for questions in [start, stop)."""
    if name == "squad":
        # One record holds every question: flatten to (article, paragraph, qa) in order.
        loc, doc = records[0]
        qi = 0
        try:
            for a, article in enumerate(doc["data"]):
                for p, para in enumerate(article["paragraphs"]):
                    for qa in para["qas"]:
                        if stop is not None and qi >= stop:
                            return
                        if qi >= start:
                            yield (f"data[{a}].paragraphs[{p}]", (article["title"], para["context"], qa), qi)
                        qi += 1
        except (KeyError, TypeError) as e:
            raise DataFormatError(f"{path}: malformed squad layout ({type(e).__name__}: {e})") from None
        return
    for qi, (loc, raw) in enumerate(records[start:stop], start):
        if not isinstance(raw, dict):
            raise DataFormatError(f"{path}:{loc}: expected a JSON object, got {type(raw).__name__}")
        yield loc, raw, qi


# ---------------------------------------------------------------- converters


def _literal(v: Any) -> Any:
    """Some dumps store lists as strings of Python literals: decode those."""
    return ast.literal_eval(v) if isinstance(v, str) else v


def _dedup(items) -> list:
    return list(dict.fromkeys(items))


def _hops(qid: str) -> str | None:
    m = re.match(r"(\d+hop)", qid)
    return m.group(1) if m else None


def _str_list(v: Any) -> list[str]:
    v = _literal(v)
    if isinstance(v, str):
        return [v]
    if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
        raise TypeError(f"answers must be a list of strings, got {v!r:.80}")
    return v


def _build(
    qid: str, text: str, answers: list[str], qtype: str | None, dataset: str, paras: list[tuple[str, str, bool]]
) -> tuple[Question, list[Passage]]:
    if not isinstance(text, str):
        raise TypeError(f"question must be a string, got {type(text).__name__}")
    passages, supporting = [], []
    for title, body, sup in paras:
        if not isinstance(title, str) or not isinstance(body, str):
            raise TypeError("passage title and text must be strings")
        p = Passage(passage_id(title, body), title, body)
        passages.append(p)
        if sup:
            supporting.append(p.id)
    q = Question(
        id=str(qid),
        text=text,
        answers=_dedup(a for a in answers if a),
        type=qtype,
        supporting=_dedup(supporting),
        dataset=dataset,
    )
    return q, passages


def _from_ircot(r: dict, name: str, qi: int) -> tuple[Question, list[Passage]]:
    answers = [s for obj in r["answers_objects"] for s in obj["spans"]]
    paras = [(c["title"], c["paragraph_text"], bool(c.get("is_supporting"))) for c in r["contexts"]]
    qid = r["question_id"]
    return _build(qid, r["question_text"], answers, _hops(str(qid)), name, paras)


def _from_hotpot_raw(r: dict, name: str, qi: int) -> tuple[Question, list[Passage]]:
    context = _literal(r["context"])
    sup_titles = {f[0] for f in _literal(r["supporting_facts"])}
    # Strip each sentence: HotpotQA sentences carry leading spaces, 2Wiki ones do not.
    paras = [(t, " ".join(s.strip() for s in sents if s.strip()), t in sup_titles) for t, sents in context]
    return _build(r["_id"], r["question"], [r["answer"]], r.get("type"), name, paras)


def _from_musique(r: dict, name: str, qi: int) -> tuple[Question, list[Passage]]:
    answers = [r["answer"], *_str_list(r.get("answer_aliases", []))]
    paras = [
        (p["title"], p["paragraph_text"], bool(_literal(p.get("is_supporting", False))))
        for p in _literal(r["paragraphs"])
    ]
    return _build(r["id"], r["question"], answers, _hops(str(r["id"])), name, paras)


def _from_nq(r: dict, name: str, qi: int) -> tuple[Question, list[Passage]]:
    paras = [(c["title"], c["text"], bool(c.get("isgold"))) for c in _literal(r["ctxs"])]
    # Index of the question in the file (= 0-based line for JSONL without blank lines).
    return _build(f"nq-{qi}", r["question"], _str_list(r["answers"]), "single", name, paras)


def _from_squad_paragraph(raw: tuple, name: str, qi: int) -> tuple[Question, list[Passage]]:
    title, context, qa = raw
    answers = [a["text"] for a in qa["answers"]]
    return _build(qa["id"], qa["question"], answers, "single", name, [(title, context, True)])


def _from_generic(r: dict, name: str, qi: int) -> tuple[Question, list[Passage]]:
    paras = [(p["title"], p["text"], bool(p.get("supporting", False))) for p in r.get("passages", [])]
    answers = _str_list(r["answers"] if "answers" in r else r["answer"])
    return _build(r.get("id", f"{name}-{qi}"), r["question"], answers, r.get("type"), name, paras)


def _from_graphrag(r: dict, name: str, qi: int) -> tuple[Question, list[Passage]]:
    # The passages are the shared corpus, attached once to the whole Dataset by _with_corpus.
    if not isinstance(r["answer"], str):
        raise TypeError(f"answer must be a string, got {type(r['answer']).__name__}")
    return _build(r["id"], r["question"], [r["answer"]], r.get("question_type"), name, [])
