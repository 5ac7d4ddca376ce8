"""Shared by the lab's parts: resumable JSONL files, answer metrics, passage KBs, the logic route under experiment."""
