"""How the system grows: bench scale|serve|llm-server, the store, commit and clustering benches, their corpora."""
