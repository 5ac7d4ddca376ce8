"""The question's form without a model (engine.floor.question.structure), the structural features built on it
(router.features), and checkpoints that record which features, at which version, and which
text form they were trained on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import router.features as features
from engine.floor.base.errors import CheckpointError
from engine.floor.question.structure import (
    answer_shape,
    chain_depth,
    count_comparatives,
    count_dates,
    count_entities,
    count_lookups,
    count_numbers,
    count_superlatives,
    question_word,
)
from router.checkpoint import load_checkpoint, load_router, read_card, save_checkpoint
from router.features import ALL_FEATURES, FEATURES, cheap_features, feature_dim, feature_set_problem, feature_versions
from router.model import RouterConfig, RouterMLP
from tests.router.tiny_setup import ROUTES, tiny_embedder

pytestmark = pytest.mark.usefixtures("one_thread")


# ---------------------------------------------------------------- engine.floor.question.structure


LISTS = [
    "Which config options does the docs page of `npm audit` list in its Configuration section?",
    "Which npm commands take the `--dry-run` config option?",
    "Which modules of the Node.js API docs document a 'close' event?",
    "Which Valgrind tools' manual chapters mention the core option `--tool`?",
    "What are the main risk factors and symptoms associated with primary bone cancer?",
    "What biopsy types are used in the diagnosis of CSCC?",
    "Which chemotherapy drugs, besides methotrexate, can be used in induction therapy?",
    "What kinds of errors does Helgrind detect?",
    "List the commands that change the lockfile.",
]
EXPLANATIONS = [
    "Why is immunotherapy recommended for some colon cancer patients but not others?",
    "How does pediatric-type follicular lymphoma differ from classic FL?",
    "What evidence supports the use of chemoimmunotherapy in MGZL?",
]
VALUES = [
    "Which option makes npm audit fix update package-lock.json without touching node_modules?",
    "Which office sells tickets for the Lowen Ferry?",
    "Which DNS error code means the domain name simply doesn't exist?",
    "What is the default value of --max-old-space-size?",
    "How do I make npm save exact versions?",
    "How many times does npm retry a fetch?",
    "Which film was released first, Seven Miles From Alcatraz or Vino Veritas?",
    "Who is the director of Inception?",
]


def test_the_answer_a_question_asks_for_is_a_list_an_explanation_or_one_value():
    assert [answer_shape(q) for q in LISTS] == ["list"] * len(LISTS)
    assert [answer_shape(q) for q in EXPLANATIONS] == ["explanation"] * len(EXPLANATIONS)
    assert [answer_shape(q) for q in VALUES] == ["value"] * len(VALUES)


def test_the_shape_feature_marks_a_list_and_an_explanation():
    got = cheap_features([LISTS[0], EXPLANATIONS[0], VALUES[0]], ["shape"])
    assert got.tolist() == [[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]


def test_a_lookup_and_a_comparison_differ_in_form():
    lookup = "Who founded the Velmora Glassworks?"
    comparison = "Is the founder of Arkwell older than the founder of Brightwell Logistics?"
    assert (question_word(lookup), chain_depth(lookup), count_comparatives(lookup)) == ("who", 0, 0)
    assert (question_word(comparison), chain_depth(comparison), count_comparatives(comparison)) == ("yesno", 1, 2)


@pytest.mark.parametrize(
    "question, dates, numbers",
    [
        ("Who was born on 3 March 1990 in Lyon?", 1, 0),
        ("What happened on March 3, 1990?", 1, 0),
        ("Which of the two films came out in the 1990s?", 1, 1),
        ("How many of the 1,200 workers joined in 1987 or 1990?", 2, 1),
        ("Which castle was built in the 12th century?", 1, 0),
        ("How tall is the Meridian Spire?", 0, 0),
        ("Who was one of the 3 founders?", 0, 1),
    ],
)
def test_dates_and_numbers(question, dates, numbers):
    assert (count_dates(question), count_numbers(question)) == (dates, numbers)


@pytest.mark.parametrize(
    "question, depth",
    [
        ("Which river flows through Budapest?", 0),
        ("What is the capital of Drovnia?", 1),
        ("What is the nationality of the director of the film Amélie?", 2),
        ("Where was the mother of the director of Quiet Harbour born?", 2),
        ("What is Maribel Ostrow's father's birthplace?", 2),
        ("Who is older, the founder of Patagonia or the founder of Nike?", 1),  # two chains of one
        ("Which university did Tobias Renholm attend?", 0),
        ("What is the motto of the University of Bologna?", 1),  # a name holding "of" is one entity
        ("Which is the oldest of the three castles?", 0),  # a choice, not a relation
    ],
)
def test_chain_depth_counts_nested_relations_within_one_clause(question, depth):
    assert chain_depth(question) == depth


@pytest.mark.parametrize(
    "question, lookups",
    [
        ("When was Mirela Haskin born?", 1),
        ("Who is the director of Quiet Harbour?", 1),  # asks who the chain's end is: the chain is the lookup
        ("Who is Mirela Haskin's mother?", 1),
        ("When was the director of Quiet Harbour born?", 2),  # a fact of the chain's end: one more
        ("When did Mirela Haskin's mother die?", 2),
        ("What is the nationality of the director of the film Amélie?", 2),
        ("Who founded the company that builds the Varro engine?", 2),  # a relative clause finds an entity
        ("What is the capital of the country where the Osk river rises?", 2),
        ("Which was founded earlier, Harlowby Abbey or Kellmouth Priory?", 2),  # one per entity compared
        ("Where was the mother of the director of Quiet Harbour born?", 3),
    ],
)
def test_lookups_count_the_retrievals_the_form_asks_for(question, lookups):
    assert count_lookups(question) == lookups


@pytest.mark.parametrize(
    "question, comparatives, superlatives",
    [
        ("Who was born first, Ann Lee or Tom Ford?", 0, 1),
        ("Which film came out earlier, Vertigo or Psycho?", 1, 0),
        ("Are both Harlowby and Kellmouth on the same river?", 2, 0),
        ("Is the oldest bridge longer than the newest one?", 2, 2),
        ("What is the interest rate of the West Bank of Drovnia?", 0, 0),  # -est words that are not superlatives
        ("Who won Best Picture in 2001?", 0, 0),  # a capitalised name, not an operator
        ("Who wrote the novel The Salt Orchard?", 0, 0),
    ],
)
def test_comparison_and_superlative_operators(question, comparatives, superlatives):
    assert (count_comparatives(question), count_superlatives(question)) == (comparatives, superlatives)


def test_entities_are_named_spans_not_dates():
    assert count_entities("Who was born first, Ann Lee or Tom Ford?") == 2
    assert count_entities("Were Ann Lee and Tom Ford born on May 5?") == 2
    assert count_entities('Who sang "Hollow Hearts" at the Lantern Tide festival?') == 2
    assert count_entities("what is a river") == 0


# ---------------------------------------------------------------- router.features


def test_structural_feature_columns_are_scaled_and_documented():
    qs = [
        "Who founded the Velmora Glassworks?",
        "How many years passed between the founding of Velmora Glassworks in 1850 and 1901?",
        "What is the date of birth of the mother of the director of the best film of 1990?",
        "",
    ]
    x = cheap_features(qs, ALL_FEATURES)
    assert x.shape == (4, feature_dim(ALL_FEATURES)) and x.min() >= 0.0 and x.max() <= 1.0
    for name in FEATURES:  # every feature is in the module's table
        assert f"| {name} |" in features.__doc__
    new = cheap_features(qs[:3], ("dates", "numbers", "depth", "operators"))
    assert new[0].tolist() == [0.0, 0.0, 0.0, 0.0, 0.0]
    np.testing.assert_allclose(new[1], [1.0, 0.0, 1 / 3, 0.5, 0.0])  # two dates, one relation, "between"
    assert new[2, 2] == 1.0 and new[2, 4] == 0.5  # a chain of three or more, one superlative


def test_feature_versions_and_why_a_feature_set_cannot_be_served():
    assert feature_versions(("length", "depth")) == {"length": 1, "depth": 1}
    assert feature_set_problem(ALL_FEATURES, feature_versions(ALL_FEATURES)) is None
    assert feature_set_problem(("length",), None) is None  # a card from before versions: version 1
    assert "does not compute" in feature_set_problem(("length", "sentiment"), None)
    assert "depth (version 2 in the checkpoint, 1 here)" in feature_set_problem(("depth",), {"depth": 2})


# ---------------------------------------------------------------- checkpoints record their inputs


def _checkpoint(path, text_form="question", names=("length", "depth", "operators")):
    torch.manual_seed(0)
    m = RouterMLP(RouterConfig(routes=ROUTES, embed_dim=16, features=names, hidden=(8, 4), text_form=text_form))
    save_checkpoint(path, m, {"embedder": {"id": "tiny-bow", "dim": 16}})
    return path


def test_a_checkpoint_records_its_features_versions_and_text_form(tmp_path):
    card = read_card(_checkpoint(tmp_path / "r.ckpt", "masked"))
    assert card["config"]["features"] == ["length", "depth", "operators"]
    assert card["config"]["feature_versions"] == {"length": 1, "depth": 1, "operators": 1}
    assert card["config"]["text_form"] == "masked"
    model, _ = load_checkpoint(tmp_path / "r.ckpt")
    assert model.config.input_dim == 16 + 1 + 1 + 2


def test_a_masked_checkpoint_embeds_the_masked_question(tmp_path):
    emb = tiny_embedder()
    router = load_router(_checkpoint(tmp_path / "r.ckpt", "masked"), embedder=emb)
    router.probs(["Who was born first, Ann Lee or Tom Ford?"])
    assert emb.calls == [["Who was born first, X or X?"]]
    x = router.inputs(["Who was born first, Ann Lee or Tom Ford?"])
    np.testing.assert_array_equal(
        x[0, 16:], cheap_features(["Who was born first, Ann Lee or Tom Ford?"], router.features)[0]
    )


@pytest.mark.parametrize(
    "asked, embedded",
    [
        ("Who wrote Dune?", "Who wrote Dune"),
        ("who wrote Dune", "who wrote Dune"),
        ("Who wrote Dune ?!", "Who wrote Dune"),
        ("  Who wrote   Dune. ", "Who wrote Dune"),
    ],
)
def test_a_plain_checkpoint_embeds_the_question_without_its_closing_marks(tmp_path, asked, embedded):
    """Sets differ in how a question ends (NQ: never with "?"); a plain router cannot tell them
    apart by it. Case is kept: the embedder decides what case means."""
    emb = tiny_embedder()
    router = load_router(_checkpoint(tmp_path / "r.ckpt", "plain"), embedder=emb)
    router.probs([asked])
    assert emb.calls == [[embedded]]
    assert features.embedded_text("What is 3.5?", "plain") == "What is 3.5"


def test_the_text_form_option_offers_every_text_form():
    from training.fitting.cmd_train import text_form_option

    option = text_form_option("text embedded")(lambda: None).__click_params__[0]
    assert tuple(option.type.choices) == features.TEXT_FORMS


def test_a_checkpoint_with_features_computed_otherwise_is_refused(tmp_path, monkeypatch):
    path = _checkpoint(tmp_path / "r.ckpt")
    monkeypatch.setitem(FEATURES, "depth", FEATURES["depth"]._replace(version=2))
    with pytest.raises(CheckpointError, match=r"depth \(version 1 in the checkpoint, 2 here\)") as e:
        load_router(path, embedder=tiny_embedder())
    assert str(path) in str(e.value) and "retrain" in str(e.value)


def test_a_checkpoint_with_an_unknown_feature_or_text_form_is_refused(tmp_path, monkeypatch):
    path = _checkpoint(tmp_path / "r.ckpt", "masked")
    monkeypatch.delitem(FEATURES, "operators")
    with pytest.raises(CheckpointError, match="operators that this version of logicroute does not compute"):
        load_checkpoint(path)
    monkeypatch.undo()
    monkeypatch.setattr(features, "TEXT_FORMS", ("question",))
    with pytest.raises(CheckpointError, match="text form 'masked'"):
        load_checkpoint(path)


def test_entity_spans_are_the_names_masking_replaces_as_written():
    from engine.floor.question.structure import entity_spans

    assert entity_spans("Who was born first, Ann Lee or Tom Ford?") == ["Ann Lee", "Tom Ford"]
    assert entity_spans('Who directed "Vertigo" and The Lord of the Rings in 2001?') == [
        "Vertigo",
        "The Lord of the Rings",
    ]
    assert entity_spans("when was catch me if you can made") == []
