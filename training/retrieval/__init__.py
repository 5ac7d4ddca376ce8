"""`bench retrieval`: dense, lexical and hybrid retrieval on QA sets, documentation questions, a growing KB."""
