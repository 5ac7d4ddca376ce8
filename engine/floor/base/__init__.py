"""The floor: types, errors, atomic files, SQLite setup, answer metrics. Imports nothing of ours."""
