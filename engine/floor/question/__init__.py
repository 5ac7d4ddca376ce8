"""A question as the rest of logicroute reads it: `engine.floor.question.parse.Question`, built once per answered
question, and the grammar that reads its form without a model (`engine.floor.question.forms`: the
sub-questions a few fixed forms ask for; `engine.floor.question.structure`: its answer shape, question word
and structural counts). It sits below the router and the routes, which both read it."""
