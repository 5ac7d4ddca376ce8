"""The three routes: chunk, summary, logic."""
