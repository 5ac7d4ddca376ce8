"""Answering: LLM clients, embeddings, the three routes, the routed pipeline.

Nothing heavy is imported here: `import engine` is instant."""
