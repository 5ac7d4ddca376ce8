"""The floor: types, the question read once, LLM clients, prompts, the embedder; below everything."""
