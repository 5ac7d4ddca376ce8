"""hierarchy.store: the commit protocol shared by the KB and the summary layers."""

from __future__ import annotations

import json

import pytest

from engine.floor.base.errors import KBCorruptError, KBError
from hierarchy import store


def _record(payload: dict[str, bytes]) -> dict:
    return {"files": {name: store.fingerprint(b) for name, b in payload.items()}}


def test_fingerprint_is_size_and_sha1():
    # Stored in every KB manifest: the value for given bytes never changes.
    assert store.fingerprint(b"hello") == {"bytes": 5, "sha1": "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d"}


def test_commit_writes_data_then_record(tmp_path):
    payload = {"a.bin": b"one", "b.bin": b"two"}
    done = []
    store.commit(
        tmp_path, "record.json", _record(payload), payload, on_commit=lambda: done.append(1), expected_files={}
    )
    assert done == [1] and (tmp_path / "a.bin").read_bytes() == b"one"
    assert json.loads((tmp_path / "record.json").read_text()) == _record(payload)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "a.bin", "b.bin", "record.json"]


def test_a_reader_reads_past_a_failed_commit_and_the_writer_recovers(tmp_path, monkeypatch):
    first = {"a.bin": b"one"}
    store.commit(tmp_path, "record.json", _record(first), first, expected_files={})

    def boom(*a, **k):
        raise RuntimeError("crash before the record")

    monkeypatch.setattr(store, "atomic_write_json", boom)
    monkeypatch.setattr(store, "restore_snapshots", lambda directory, names: None)  # a hard crash
    done = []
    with pytest.raises(RuntimeError):
        store.commit(
            tmp_path,
            "record.json",
            _record({"a.bin": b"two"}),
            {"a.bin": b"two"},
            on_commit=lambda: done.append(1),
            expected_files=_record(first)["files"],
        )
    monkeypatch.undo()
    assert done == [] and (tmp_path / "a.bin").read_bytes() == b"two"  # uncommitted bytes on disk
    fp = _record(first)["files"]["a.bin"]
    assert store.read_committed(tmp_path, "a.bin", fp, "hint") == b"one"
    assert (tmp_path / "a.bin").read_bytes() == b"two"  # reading changed nothing
    store.recover(tmp_path, "a.bin", fp, "hint")  # what the next writer does under the lock
    assert (tmp_path / "a.bin").read_bytes() == b"one" and not (tmp_path / "a.bin.prev").exists()


def test_mismatching_file_is_corrupt(tmp_path):
    (tmp_path / "a.bin").write_bytes(b"changed")
    with pytest.raises(KBCorruptError, match="does not match.*; rebuild"):
        store.read_committed(tmp_path, "a.bin", store.fingerprint(b"one"), "rebuild")


def test_commit_refuses_when_another_writer_committed(tmp_path):
    first = {"a.bin": b"one"}
    store.commit(tmp_path, "record.json", _record(first), first, expected_files={})
    with pytest.raises(KBError, match="changed by another process"):
        store.commit(tmp_path, "record.json", _record({"a.bin": b"x"}), {"a.bin": b"x"}, expected_files={})
    assert (tmp_path / "a.bin").read_bytes() == b"one"


def test_prune_keeps_only_what_the_record_names(tmp_path):
    store.commit(tmp_path, "meta.json", {"files": ["g1.json"]}, {"g1.json": b"1"}, prune=True)
    (tmp_path / "orphan.json").write_bytes(b"left by a writer that died")
    store.commit(tmp_path, "meta.json", {"files": ["g2.json"]}, {"g2.json": b"2"}, prune=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "g2.json", "meta.json"]
