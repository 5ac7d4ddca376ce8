"""LLM backends behind one protocol (base), the factory, the on-disk cache, model files."""
