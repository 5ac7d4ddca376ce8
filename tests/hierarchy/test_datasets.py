"""Data loaders: every benchmark file in ../shared/data loads in its original format,
and small hand-written files pin down the rules (dedup, slicing, errors)."""

import gzip
import json
from collections import Counter

import pytest

from engine.floor.base.errors import DataFormatError, UnknownFormatError
from hierarchy.datasets import FORMATS, Dataset, load_dataset, passage_id
from training.common.shared_data import SHARED_FILES

# name -> (questions, hop/type label counts)
EXPECTED = {
    "hotpotqa": (500, {None: 500}),
    "2wiki": (500, {"compositional": 227, "comparison": 162, "bridge_comparison": 92, "inference": 19}),
    "musique": (200, {"2hop": 145, "3hop": 32, "4hop": 23}),
    "nq": (2655, {"single": 2655}),
    "squad": (10570, {"single": 10570}),
}


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def generic(qid, passages, answers=("x",), **extra):
    return {"id": qid, "question": f"question {qid}?", "answers": list(answers), "passages": passages, **extra}


def check_consistent(ds: Dataset):
    ids = [p.id for p in ds.passages]
    assert len(ids) == len(set(ids)), "passages are deduplicated"
    known = set(ids)
    for q in ds.questions:
        assert q.dataset == ds.name
        assert q.answers and all(isinstance(a, str) for a in q.answers)
        assert set(q.supporting) <= known, f"{q.id} points to a passage not in the dataset"


# ---------------------------------------------------------------- real files


@pytest.mark.shared_data
@pytest.mark.parametrize("name", list(EXPECTED))
def test_shared_data_file_loads_with_expected_counts_and_labels(shared_data, name):
    ds = load_dataset(shared_data / SHARED_FILES[name])
    n_questions, labels = EXPECTED[name]
    assert ds.name == name
    assert len(ds.questions) == n_questions
    assert Counter(q.type for q in ds.questions) == labels
    assert all(q.supporting for q in ds.questions), "every question has supporting passages"
    check_consistent(ds)


@pytest.mark.shared_data
def test_shared_data_hotpotqa_reads_ircot_fields(shared_data):
    ds = load_dataset(shared_data / SHARED_FILES["hotpotqa"], n=1)
    q = ds.questions[0]
    assert q.id == "5a8c7595554299585d9e36b6"
    assert q.answers == ["Chief of Protocol"]
    assert q.type is None
    assert len(ds.passages) == 10 and len(q.supporting) == 2
    titles = {p.id: p.title for p in ds.passages}
    assert {titles[s] for s in q.supporting} == {"Kiss and Tell (1945 film)", "Shirley Temple"}


@pytest.mark.shared_data
def test_shared_data_2wiki_joins_sentences_and_supports_by_title(shared_data):
    ds = load_dataset(shared_data / SHARED_FILES["2wiki"], n=1)
    q = ds.questions[0]
    assert q.answers == ["October 5, 1987"] and q.type == "compositional"
    titles = {p.id: p.title for p in ds.passages}
    assert {titles[s] for s in q.supporting} == {"Get Low (Dillon Francis and DJ Snake song)", "Dillon Francis"}
    assert all("  " not in p.text and p.text == p.text.strip() for p in ds.passages)


@pytest.mark.shared_data
def test_shared_data_musique_takes_aliases_and_hops(shared_data):
    ds = load_dataset(shared_data / SHARED_FILES["musique"])
    q = ds.questions[0]
    assert (q.id, q.answers, q.type) == ("2hop__574419_270105", ["Stanley"], "2hop")
    with_aliases = [q for q in ds.questions if len(q.answers) > 1]
    assert with_aliases, "answer_aliases join the answer list"
    assert all(len(q.supporting) == int(q.type[0]) for q in ds.questions), "an n-hop question has n supports"


@pytest.mark.shared_data
def test_shared_data_dedup_shares_passages_across_questions(shared_data):
    ds = load_dataset(shared_data / SHARED_FILES["musique"])
    raw = sum(
        len(json.loads(line)["paragraphs"])
        for line in (shared_data / SHARED_FILES["musique"]).read_text(encoding="utf-8").splitlines()
    )
    assert raw == 4000
    assert len(ds.passages) == 3141  # identical title+text kept once


@pytest.mark.shared_data
def test_shared_data_slicing_takes_only_the_passages_of_the_questions_taken(shared_data):
    path = shared_data / SHARED_FILES["hotpotqa"]
    full = load_dataset(path)
    part = load_dataset(path, n=5, offset=10)
    assert [q.id for q in part.questions] == [q.id for q in full.questions[10:15]]
    assert [q.supporting for q in part.questions] == [q.supporting for q in full.questions[10:15]]
    assert {p.id for p in part.passages} <= {p.id for p in full.passages}
    assert 10 <= len(part.passages) <= 50
    # each question names the passages it came with; together they are the slice's passages
    assert {i for q in part.questions for i in q.passages} == {p.id for p in part.passages}
    assert all(set(q.supporting) <= set(q.passages) for q in part.questions)
    assert load_dataset(path, n=0).questions == []
    assert len(load_dataset(path, offset=495).questions) == 5
    assert load_dataset(path, offset=10_000).questions == []


@pytest.mark.shared_data
def test_shared_data_squad_slice_keeps_its_paragraphs_only(shared_data):
    ds = load_dataset(shared_data / SHARED_FILES["squad"], n=3)
    assert len(ds.passages) == 1 and ds.passages[0].title == "1973 oil crisis"
    assert ds.questions[0].answers == ["October 1973", "October", "1973"]  # deduplicated
    assert len(load_dataset(shared_data / SHARED_FILES["squad"]).passages) == 2067


@pytest.mark.shared_data
def test_shared_data_nq_ids_are_line_indexes_whatever_the_offset(shared_data):
    ds = load_dataset(shared_data / SHARED_FILES["nq"], n=2, offset=5)
    assert [q.id for q in ds.questions] == ["nq-5", "nq-6"]
    assert all(q.type == "single" and len(q.supporting) == 1 for q in ds.questions)


# ---------------------------------------------------------------- small files


def test_generic_jsonl_round_trip(tmp_path):
    shared = {"title": "Paris", "text": "Paris is the capital of France.", "supporting": True}
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [
            generic("q1", [shared, {"title": "Lyon", "text": "Lyon is a city."}], answers=["Paris"], type="single"),
            generic("q2", [dict(shared, supporting=False), {"title": "Rome", "text": "Rome.", "supporting": True}]),
        ],
    )
    ds = load_dataset(path)
    assert ds.name == "mine"
    q1, q2 = ds.questions
    assert (q1.id, q1.text, q1.answers, q1.type) == ("q1", "question q1?", ["Paris"], "single")
    assert q2.type is None
    paris = passage_id("Paris", "Paris is the capital of France.")
    assert [p.id for p in ds.passages] == [paris, passage_id("Lyon", "Lyon is a city."), passage_id("Rome", "Rome.")]
    assert q1.supporting == [paris] and q2.supporting == [passage_id("Rome", "Rome.")]
    check_consistent(ds)


def test_passage_ids_are_stable_short_content_hashes():
    # Persisted in label files and KBs: the id of a given passage never changes.
    assert passage_id("A", "text") == "413fc9167b0925b9"
    assert passage_id("A", "text") != passage_id("B", "text")
    assert passage_id("ab", "c") != passage_id("a", "bc")


def test_gzipped_jsonl_loads_like_plain(tmp_path):
    rec = generic("q1", [{"title": "T", "text": "x", "supporting": True}])
    path = tmp_path / "g.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")
    ds = load_dataset(path)
    assert ds.name == "g" and ds.questions[0].supporting == [passage_id("T", "x")]


def test_raw_2wiki_fields_given_as_python_literal_strings_are_parsed(tmp_path):
    rec = {
        "_id": "w1",
        "type": "comparison",
        "question": "Who is older?",
        "answer": "Ann",
        "context": str(
            [["Ann", ["Ann was born.", "She sings."]], ["Bob", ["Bob was born."]], ["Cal", ["Cal is unrelated."]]]
        ),
        "supporting_facts": str([["Ann", 0], ["Bob", 0]]),
        "evidences": str([["Ann", "born", "1900"]]),
    }
    path = tmp_path / "w.json"
    path.write_text(json.dumps([rec]), encoding="utf-8")
    ds = load_dataset(path)
    assert ds.name == "2wiki"
    q = ds.questions[0]
    assert (q.id, q.answers, q.type) == ("w1", ["Ann"], "comparison")
    assert ds.passages[0].text == "Ann was born. She sings."
    assert q.supporting == [passage_id("Ann", "Ann was born. She sings."), passage_id("Bob", "Bob was born.")]


def test_raw_hotpotqa_json_strips_sentence_spaces(tmp_path):
    rec = {
        "_id": "h1",
        "type": "bridge",
        "level": "hard",
        "question": "Q?",
        "answer": "yes",
        "context": [["T1", ["First.", " Second."]], ["T2", ["Other."]]],
        "supporting_facts": [["T1", 1]],
    }
    path = tmp_path / "hotpot_dev.json"
    path.write_text(json.dumps([rec]), encoding="utf-8")
    ds = load_dataset(path)
    assert ds.name == "hotpotqa" and ds.questions[0].type == "bridge"
    assert ds.passages[0].text == "First. Second."
    assert ds.questions[0].supporting == [passage_id("T1", "First. Second.")]


def test_musique_json_array_is_accepted(tmp_path):
    rec = {
        "id": "3hop1__1_2_3",
        "question": "Q?",
        "answer": "A",
        "answer_aliases": ["a1"],
        "paragraphs": [{"idx": 0, "title": "P", "paragraph_text": "p", "is_supporting": True}],
    }
    path = tmp_path / "m.json"
    path.write_text(json.dumps([rec]), encoding="utf-8")
    ds = load_dataset(path)
    assert ds.name == "musique"
    assert (ds.questions[0].type, ds.questions[0].answers) == ("3hop", ["A", "a1"])


def test_malformed_line_refuses_the_load_naming_file_and_line(tmp_path):
    good = json.dumps(generic("q1", [{"title": "T", "text": "x"}]))
    path = tmp_path / "bad.jsonl"
    path.write_text(f"{good}\n{good}\n{{not json\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"bad\.jsonl:3"):
        load_dataset(path, n=1)  # even outside the slice: nothing partial


def test_malformed_record_names_file_and_line(tmp_path):
    path = write_jsonl(
        tmp_path / "bad.jsonl",
        [
            generic("q1", [{"title": "T", "text": "x"}]),
            {"id": "q2", "question": "Q?", "answers": ["a"], "passages": [{"title": "T"}]},
        ],
    )
    with pytest.raises(DataFormatError, match=r"bad\.jsonl:2"):
        load_dataset(path)


def test_unknown_format_names_the_supported_ones(tmp_path):
    path = write_jsonl(tmp_path / "odd.jsonl", [{"foo": 1}])
    with pytest.raises(UnknownFormatError) as e:
        load_dataset(path)
    for name in FORMATS:
        assert name in str(e.value)
    (tmp_path / "table.csv").write_text("a,b\n", encoding="utf-8")
    with pytest.raises(UnknownFormatError, match="csv"):
        load_dataset(tmp_path / "table.csv")


def test_empty_file_is_a_format_error(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="no records"):
        load_dataset(tmp_path / "empty.jsonl")


# ---------------------------------------------------------------- GraphRAG-Bench: one corpus for all questions

GRAPHRAG_TYPES = {
    "Fact Retrieval": 549,
    "Complex Reasoning": 255,
    "Contextual Summarize": 144,
    "Creative Generation": 83,
}


def write_graphrag(folder, n_questions=3, sentences=60, corpus_name="Medical"):
    """A questions file and, beside it, a corpus of one long text (8 words a sentence)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = " ".join(f"Sentence {i} tells fact number {i} about care." for i in range(sentences))
    (folder / "medical_corpus.json").write_text(json.dumps([{"corpus_name": corpus_name, "context": text}]))
    questions = [
        {
            "id": f"Medical-{i}",
            "source": "Medical",
            "question": f"What does sentence {i} tell?",
            "answer": f"Sentence {i} tells fact number {i}.",
            "question_type": "Fact Retrieval" if i % 2 else "Contextual Summarize",
        }
        for i in range(n_questions)
    ]
    path = folder / "medical_questions_dev.json"
    path.write_text(json.dumps(questions))
    return path


def test_graphrag_questions_share_the_corpus_beside_them_cut_into_passages(tmp_path):
    from hierarchy.data_files import CORPUS_CHUNK_WORDS

    ds = load_dataset(write_graphrag(tmp_path))
    assert ds.name == "graphrag_medical" and ds.corpus == str(tmp_path / "medical_corpus.json")
    q = ds.questions[1]
    assert (q.id, q.text, q.answers, q.type, q.dataset) == (
        "Medical-1",
        "What does sentence 1 tell?",
        ["Sentence 1 tells fact number 1."],
        "Fact Retrieval",
        "graphrag_medical",
    )
    assert q.supporting == []
    # 60 sentences of 8 words = 480 words -> 150-word passages of whole sentences: 144, 144, 144, 48
    assert [len(p.text.split()) for p in ds.passages] == [144, 144, 144, 48]
    assert all(len(p.text.split()) <= CORPUS_CHUNK_WORDS for p in ds.passages)
    assert (
        " ".join(p.text for p in ds.passages).split()
        == json.loads((tmp_path / "medical_corpus.json").read_text())[0]["context"].split()
    ), "no overlap, nothing lost"
    assert all(p.title == "Medical" and p.id == passage_id(p.title, p.text) for p in ds.passages)
    assert all(q.passages == [p.id for p in ds.passages] for q in ds.questions)
    check_consistent(ds)


def test_graphrag_slices_questions_but_keeps_the_whole_corpus(tmp_path):
    path = write_graphrag(tmp_path, n_questions=5)
    full, part = load_dataset(path), load_dataset(path, n=2, offset=3)
    assert [q.id for q in part.questions] == ["Medical-3", "Medical-4"]
    assert [p.id for p in part.passages] == [p.id for p in full.passages], "ids are deterministic"


def test_graphrag_corpus_argument_and_its_errors(tmp_path):
    from engine.floor.base.errors import LogicRouteError

    questions = write_graphrag(tmp_path / "a")
    other = write_graphrag(tmp_path / "b", sentences=5, corpus_name="Other").parent / "medical_corpus.json"
    ds = load_dataset(questions, corpus=other)
    assert ds.corpus == str(other) and [p.title for p in ds.passages] == ["Other"]
    with pytest.raises(LogicRouteError, match="no such corpus"):
        load_dataset(questions, corpus=tmp_path / "missing.json")
    (tmp_path / "a" / "medical_corpus.json").unlink()
    with pytest.raises(LogicRouteError, match="--corpus"):
        load_dataset(questions)
    (tmp_path / "a" / "x_corpus.json").write_text(json.dumps([{"corpus_name": "X", "context": "One. Two."}]))
    assert load_dataset(questions).passages[0].title == "X", "the only *_corpus.json beside it"
    (tmp_path / "a" / "y_corpus.json").write_text("[]")
    with pytest.raises(LogicRouteError, match="several"):
        load_dataset(questions)


def test_graphrag_malformed_corpus_or_answer_is_a_format_error(tmp_path):
    path = write_graphrag(tmp_path)
    (tmp_path / "medical_corpus.json").write_text(json.dumps([{"corpus_name": "M", "text": "no context"}]))
    with pytest.raises(DataFormatError, match=r"medical_corpus\.json:record 0"):
        load_dataset(path)
    (tmp_path / "medical_corpus.json").write_text("[]")
    with pytest.raises(DataFormatError, match="no text"):
        load_dataset(path)
    rows = json.loads(path.read_text())
    rows[1]["answer"] = ["a", "list"]
    path.write_text(json.dumps(rows))
    with pytest.raises(DataFormatError, match="record 1"):
        load_dataset(path)


def test_other_formats_ignore_the_corpus_argument(tmp_path):
    path = write_jsonl(tmp_path / "g.jsonl", [generic("q1", [{"title": "T", "text": "x"}])])
    ds = load_dataset(path, corpus=write_graphrag(tmp_path / "c").parent / "medical_corpus.json")
    assert ds.corpus is None and [p.text for p in ds.passages] == ["x"]


@pytest.mark.shared_data
def test_shared_graphrag_medical_loads_with_its_types_and_corpus(shared_data):
    from hierarchy.data_files import CORPUS_CHUNK_WORDS

    ds = load_dataset(shared_data / SHARED_FILES["medical"])
    assert ds.name == "graphrag_medical"
    assert len(ds.questions) == 1031
    assert Counter(q.type for q in ds.questions) == GRAPHRAG_TYPES
    assert all(len(q.answers) == 1 and q.answers[0] for q in ds.questions)
    assert ds.corpus == str(shared_data / "graphrag_bench" / "medical_corpus.json")
    # 174,610 words cut into 1,245 passages of <= 150 words; 45 repeat another verbatim
    assert len(ds.passages) == 1200
    assert max(len(p.text.split()) for p in ds.passages) <= CORPUS_CHUNK_WORDS
    check_consistent(ds)
