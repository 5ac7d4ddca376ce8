"""`bench peers`: logicroute beside LightRAG, HippoRAG, nano-graphrag and GraphRAG, each run in its own venv."""
