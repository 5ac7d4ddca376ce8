"""Types, errors, atomic files, SQLite setup, answer metrics: imports nothing of ours."""
