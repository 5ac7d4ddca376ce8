"""Scripts that run one peer system (LightRAG, HippoRAG) inside the peers' own virtual environment,
started by training/peers/bench_peers_subprocess.py. They import only the standard library, their peer
and protocol.py beside them, never logicroute: the peers' dependencies never meet ours."""
