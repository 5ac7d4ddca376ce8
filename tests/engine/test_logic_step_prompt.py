"""Reading a rank-step reply that the token limit cut off (engine.floor.prompts.logic_step.salvage_memory)."""

from __future__ import annotations

from engine.floor.prompts.logic_step import salvage_memory


def test_a_memory_cut_mid_sentence_keeps_its_whole_sentences_once_each():
    cut = '{"memory":"Vertigo is a 1958 film. Hitchcock directed it. Hitchcock directed it. Hitch'
    assert salvage_memory(cut) == "Vertigo is a 1958 film. Hitchcock directed it."


def test_a_memory_of_one_unfinished_sentence_is_kept_as_it_is():
    assert salvage_memory('{"memory": "Vertigo was directed by Alfred') == "Vertigo was directed by Alfred"


def test_escapes_are_read_and_a_cut_escape_is_dropped():
    assert salvage_memory('{"memory":"He said \\"yes\\". \\u00e9t\\u00e9 came. Then \\') == 'He said "yes". été came.'


def test_a_reply_whose_memory_was_closed_or_never_opened_has_nothing_to_salvage():
    assert salvage_memory('{"memory":"Done.","answers":{"q1":"Fri') is None
    assert salvage_memory('{"answers":{"q1":"Fri') is None
    assert salvage_memory("") is None
