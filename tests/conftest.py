"""Fixtures shared by every test package. Import-light: pytest loads it before any test."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

# The benchmark data sit beside the repository: <parent of repo>/shared/data.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
# Set to 1 (.ci/run does) and a Milvus server that cannot start fails the tests that need it
# instead of skipping them: CI installs the `milvus` package ([dev]), so a skip there is a fault.
REQUIRE_MILVUS_SERVER = "LOGICROUTE_REQUIRE_MILVUS_SERVER"


def pytest_sessionstart(session):
    """Import pymilvus (when installed) before any test can import absl (rouge_score does).

    pymilvus runs logging.config.dictConfig on import, which closes every live logging handler.
    absl's handler closes its stream unless that stream is the current sys.stderr, and under a
    CliRunner it is not: it is pytest's capture, and closing it loses the session's stderr.
    With pymilvus imported first, no absl handler exists yet, whatever order the tests run in.
    """
    with contextlib.suppress(ImportError):
        import pymilvus  # noqa: F401


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path of ../shared/data. Fails (never skips): the data are part of the test setup."""
    if not SHARED_DATA.is_dir():
        pytest.fail(
            f"shared data folder missing: expected {SHARED_DATA} "
            "(the benchmark files live in ../shared/data relative to the repo root)"
        )
    return SHARED_DATA


def start_milvus_server(data_dir: Path):
    """A started tests.milvus_server.MilvusServer, or a skip (a failure under REQUIRE_MILVUS_SERVER)."""
    from tests.milvus_server import MilvusServer, ServerUnavailable  # the package loads only here

    try:
        return MilvusServer(data_dir).start()
    except ServerUnavailable as e:
        reason = str(e)  # failed or skipped outside the except: the report is the reason, not a chain
    if os.environ.get(REQUIRE_MILVUS_SERVER) == "1":
        pytest.fail(f"no Milvus server ({REQUIRE_MILVUS_SERVER}=1): {reason}", pytrace=False)
    pytest.skip(f"no Milvus server: {reason}")


@pytest.fixture(scope="session")
def milvus_server(tmp_path_factory):
    """One Milvus standalone server (the `milvus` package) for the whole session, on a free
    loopback port; the specs that stop or kill a server use one of their own
    (tests/hierarchy/test_milvus_server_faults.py), so this one stays up. Stopped at the end,
    its process group with it."""
    server = start_milvus_server(tmp_path_factory.mktemp("milvus-server"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def _milvus_fault_server_once(tmp_path_factory):
    server = start_milvus_server(tmp_path_factory.mktemp("milvus-fault-server"))
    yield server
    server.stop()


@pytest.fixture
def milvus_fault_server(_milvus_fault_server_once):
    """A second Milvus server for the specs of its faults, which stop, kill and restart it:
    running when a spec starts (started again here, on the same port and data, if the spec
    before left it down), so `milvus_server` never sees a fault."""
    server = _milvus_fault_server_once
    if not server.running:
        server.start()  # from the main thread: the server dies with the thread that starts it
    return server


@pytest.fixture(scope="session")
def real_embedder():
    """The real MiniLM embedder every test marked `embedder` shares (tests.real_embedder)."""
    from tests.real_embedder import shared_test_embedder  # imports the engine: not before a test asks

    return shared_test_embedder()


@pytest.fixture
def one_thread():
    """Tiny tensors: one thread is fastest, and spares the shared CPU from spin-waiting."""
    import torch  # not at collection: most tests never touch torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session", autouse=True)
def cli_usage_errors_fail():
    """A test that runs a command fails on a usage error it does not expect (tests.cli_usage)."""
    from click.testing import CliRunner

    from tests.cli_usage import guarded_invoke

    with pytest.MonkeyPatch.context() as m:
        m.setattr(CliRunner, "invoke", guarded_invoke)
        yield
