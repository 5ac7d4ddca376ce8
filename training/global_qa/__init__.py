"""`bench global`: questions about a whole corpus (GraphRAG-Bench), every system scored and judged."""
