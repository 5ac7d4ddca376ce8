"""A second set of questions written for the routing test, about invented entities, drawn from no
data set. Written after the form reader (engine/floor/question/forms.py) was first developed and before its last changes, and
never used to develop it: a check of the form reader and the form policy on questions neither
has been shaped by (tests/router/routing_questions.py was looked at while writing forms.py)."""

ONE_HOP_FRESH = [
    "Who painted the Quarry at Dunmere?",
    "When was the Halvick Bridge completed?",
    "What is the population of Orrensby?",
    "Which company builds the Teskar locomotive?",
    "Who is the lead singer of The Copper Wrens?",
    "Where is the Ilvane Museum of Clocks located?",
    "What language is spoken in Marrowgate?",
    "Who wrote the novel The Ninth Lantern?",
    "When did the Brasswick Fair first take place?",
    "Which river flows past the village of Tullen?",
    "Who directed the film Harbour of Glass?",
    "What is the height of the Sorrel Tower?",
    "Who founded the Pellham Observatory?",
    "In which year did Ardith Cole win the Varnholt Prize?",
    "What is the official currency of Quessia?",
    "Who was the first mayor of Linderholm?",
    "Which team won the 1998 Corvane Cup?",
    "What instrument does Emeric Sallow play?",
    "Where was Oriel Dunstan born?",
    "What is the name of the ship that sank at Keldon Point?",
]

MULTI_HOP_FRESH = [
    "Who was born later, Ardith Cole or Emeric Sallow?",
    "Which film was released first, Harbour of Glass or The Salt Road?",
    "When was the founder of the Pellham Observatory born?",
    "Where did the author of The Ninth Lantern die?",
    "What is the nationality of the painter of the Quarry at Dunmere?",
    "Who is the mother of the lead singer of The Copper Wrens?",
    "Were Oriel Dunstan and Ardith Cole from the same country?",
    "Are the directors of Harbour of Glass and The Salt Road from the same country?",
    "Which film has the director who died first, Harbour of Glass or Winter Ledger?",
    "Who is the spouse of the composer of the Brasswick Overture?",
    "Where was the father of Emeric Sallow born?",
    "Which university did the director of The Salt Road attend?",
    "What is the capital of the country where Marrowgate is located?",
    "Who is older, the founder of Teskar Works or the mayor of Linderholm?",
    "When did the architect of the Sorrel Tower die?",
    "In which city was the wife of Oriel Dunstan born?",
    "Which river flows through the town where Ardith Cole was born?",
    "Who succeeded the king who founded Quessia?",
    "What award did the author of The Ninth Lantern win for the novel after it?",
    "Is the Sorrel Tower taller than the Halvick Bridge?",
]
