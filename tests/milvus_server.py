"""A real Milvus standalone server for the tests and for trying a KB on a server: the registries'
`milvus` package (2.3.x: the Milvus binary with an embedded etcd and RocksMQ), started as a
process of its own on free loopback ports with its data in a folder of ours.

    python -m tests.milvus_server --port 19530 --data .milvus-server    # `make milvus`

Why not the package's own `default_server.start()`: its embedded etcd always listens on
2379/2380, so a server left behind by a killed wrapper makes the next start hang; its `stop`
kills after one second, mid-flush; and it unpacks 56 MB of binaries into every data folder.
Here etcd gets ports of its own, the binaries are unpacked once into the cache, the server runs
in its own process group (stopped with SIGTERM, then SIGKILL, group-wide, so no child is left),
dies with the process that started it (PR_SET_PDEATHSIG), and a pid file lets the next start
end a server that a SIGKILLed wrapper left running."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import lzma
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from engine.floor.base.files import atomic_write_text, cache_dir

START_TIMEOUT_S = 120.0  # ~3 s on an idle machine; the binaries' first unpacking adds ~11 s
# etcd lease of each component's session (see _configure): 30 s by default. At 5 s a loaded
# machine missed a keep-alive and the server shut itself down ("requested lease not found").
SESSION_TTL_S = 15
GRACEFUL_STOP_S = 3  # the server's own bound on a clean stop (see _configure)
STOP_TIMEOUT_S = 5.0  # past it the stop becomes SIGKILL (its coordinators can take 20 s+ to stop)
_PR_SET_PDEATHSIG = 1


class ServerUnavailable(RuntimeError):
    """The server cannot run here (package missing, binary refused, never answered)."""


def free_ports(n: int) -> list[int]:
    """n distinct free loopback ports (all held until all are picked, so none repeats)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def package_version() -> str:
    try:
        import milvus
    except ImportError as e:
        raise ServerUnavailable("the `milvus` package is not installed (pip install 'milvus==2.3.5')") from e
    return milvus.__version__


def binaries() -> Path:
    """The folder of the server binary and its libraries, unpacked once per package version
    (into a temporary folder renamed into place, so a killed unpacking is never half used)."""
    import milvus

    home = cache_dir() / f"milvus-server-{package_version()}"
    bin_dir = home / "bin"
    if (bin_dir / "milvus").is_file():
        return bin_dir
    home.mkdir(parents=True, exist_ok=True)
    src = Path(milvus.__file__).parent / "data" / "bin"
    tmp = Path(tempfile.mkdtemp(prefix="bin-", dir=home))
    for packed in src.glob("*.lzma"):
        with lzma.open(packed) as f, open(tmp / packed.stem, "wb") as out:
            shutil.copyfileobj(f, out)
        (tmp / packed.stem).chmod(0o755)
    try:
        tmp.rename(bin_dir)
    except OSError:  # another process unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return bin_dir


def _pids_dir() -> Path:
    return cache_dir() / "milvus-server-pids"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # somebody else's process: alive
        pass
    return True


def end_strays() -> list[int]:
    """End servers our pid files name whose wrapper (the process that started them) is gone; a
    server whose wrapper lives is another test run's, or this one's other server. The server is
    recognised by the binary it runs, never by name, so a pid reused by another program is left
    alone. Returns the pids ended."""
    ended = []
    for f in _pids_dir().glob("*.pid") if _pids_dir().is_dir() else ():
        pid = int(f.stem)
        exe, _, owner = f.read_text().partition("\n")
        if owner.strip().isdigit() and _alive(int(owner)):
            continue
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/exe") == exe.strip():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                ended.append(pid)
        f.unlink(missing_ok=True)
    return ended


def _die_with_parent() -> None:
    # Runs in the child before exec: the kernel SIGKILLs it when the thread that started it ends,
    # so a server never outlives a test run killed with SIGKILL (no teardown runs then).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class MilvusServer:
    """One standalone server on 127.0.0.1:`port`, data in `data_dir`. start/stop/kill/restart
    keep the same ports and data, so a restarted server holds what it held before."""

    def __init__(self, data_dir: str | os.PathLike, port: int | None = None):
        self.data_dir = Path(data_dir).resolve()
        self.port = port or 0  # 0: picked with the others (_configure), so none repeats
        self.proc: subprocess.Popen | None = None
        self._env: dict[str, str] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _configure(self, bin_dir: Path) -> dict[str, str]:
        """Write configs/milvus.yaml (the package's template, every port ours) and the embedded
        etcd's own config, so nothing listens on a fixed port; returns the server's environment."""
        from milvus import MilvusServerConfig

        config = MilvusServerConfig(data_dir=str(self.data_dir))
        keys = [k for k in config.configurable_items if k.endswith("_port") and k != "proxy_port"]
        # A data folder used before keeps its ports: its etcd remembers the peer URL it was made with.
        saved = self.data_dir / "configs" / "logicroute-ports.json"
        names = [*keys, "peer_port", "metrics_port", "proxy_port"]
        ports = json.loads(saved.read_text()) if saved.exists() else {}
        if set(ports) != set(names):
            picked = [p for p in free_ports(len(names) + 1) if p != self.port]  # a port given may be among them
            ports = dict(zip(names, picked))
        ports["proxy_port"] = self.port = self.port or ports["proxy_port"]
        atomic_write_text(saved, json.dumps(ports))
        peer_port, metrics_port = ports["peer_port"], ports["metrics_port"]
        # Not config.resolve(): it test-binds each port without SO_REUSEADDR, which fails for a
        # minute after a stop (the old connections' TIME_WAIT); the server itself binds with it.
        for key in keys:
            config.configurable_items[key][1] = ports[key]
        config.configurable_items["proxy_port"][1] = self.port
        config.resolve_storage()
        config.write_config()
        client, peer = f"http://127.0.0.1:{ports['etcd_port']}", f"http://127.0.0.1:{peer_port}"
        etcd = self.data_dir / "configs" / "etcd.yaml"
        etcd.write_text(
            f"name: default\nlisten-client-urls: {client}\nadvertise-client-urls: {client}\n"
            f"listen-peer-urls: {peer}\ninitial-advertise-peer-urls: {peer}\ninitial-cluster: default={peer}\n"
        )
        yaml = self.data_dir / "configs" / "milvus.yaml"
        text = yaml.read_text().replace("\netcd:\n", f"\netcd:\n  config:\n    path: {etcd}\n", 1)
        # A standalone query node waits out this timeout (1800 s) on SIGTERM for another node to
        # take its segments, which never comes; the rows are safe in RocksMQ's log by then.
        text = text.replace("gracefulStopTimeout: 1800", f"gracefulStopTimeout: {GRACEFUL_STOP_S}", 1)
        # The query coordinator looks for work once a second: a new collection waits that long
        # (twice) to load. Ten times more often costs a standalone server nothing that matters.
        for key, ms in (("checkInterval: 1000", 100), ("distPullInterval: 500", 50)):
            text = text.replace(key, f"{key.split(':')[0]}: {ms}", 1)
        # After a restart the coordinators wait for the old process's etcd session to expire
        # before they trust the new query node: 30 s by default, during which loads block.
        text = text.replace("    ttl: 30 #", f"    ttl: {SESSION_TTL_S} #", 1)
        atomic_write_text(yaml, text)
        return {
            **os.environ,
            "DEPLOY_MODE": "STANDALONE",
            "METRICS_PORT": str(metrics_port),
            "MILVUS_RUN_DIR": str(self.data_dir / "run"),
            "LD_LIBRARY_PATH": f"{bin_dir}:{os.environ.get('LD_LIBRARY_PATH', '')}",
        }

    def start(self, timeout: float = START_TIMEOUT_S) -> MilvusServer:
        """Start it and return once it answers a client; ServerUnavailable (with the log's
        tail) if it exits or stays silent. Call it from a thread that lives as long as the
        server should (see _die_with_parent)."""
        bin_dir = binaries()
        end_strays()
        if self._env is None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._env = self._configure(bin_dir)
        log = open(self.data_dir / "logs" / "server.log", "ab")  # noqa: SIM115 - the child keeps it
        try:
            self.proc = subprocess.Popen(
                [str(bin_dir / "milvus"), "run", "standalone"],
                cwd=self.data_dir,
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() ends every process in it
                preexec_fn=_die_with_parent,
            )
        except OSError as e:  # a binary this machine cannot run
            raise ServerUnavailable(f"cannot run the Milvus server binary: {e}") from e
        finally:
            log.close()
        _pids_dir().mkdir(parents=True, exist_ok=True)
        atomic_write_text(_pids_dir() / f"{self.proc.pid}.pid", f"{bin_dir / 'milvus'}\n{os.getpid()}")
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        # healthz says the components are up; a listing through the client says the proxy serves
        from pymilvus import MilvusClient

        health = f"http://127.0.0.1:{self._env['METRICS_PORT']}/healthz"
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            if not self.running:
                raise ServerUnavailable(f"the Milvus server exited ({self.proc.returncode}): {self.log_tail()}")
            try:
                with urllib.request.urlopen(health, timeout=2) as r:
                    if b"OK" in r.read():
                        client = MilvusClient(uri=self.uri, timeout=5)
                        try:
                            client.list_collections(timeout=5)
                            return
                        finally:
                            client.close()
            except Exception as e:  # not up yet: refused, 503 from healthz, or the proxy not serving
                last = str(e).splitlines()[0] if str(e) else type(e).__name__
            time.sleep(0.2)
        raise ServerUnavailable(f"the Milvus server did not answer in {timeout:.0f} s ({last}): {self.log_tail()}")

    def log_tail(self, lines: int = 5) -> str:
        log = self.data_dir / "logs" / "server.log"
        text = log.read_text(errors="replace") if log.exists() else ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def _end(self, sig: int, wait_s: float) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        with contextlib.suppress(ProcessLookupError):  # a child that outlived the leader
            os.killpg(self.proc.pid, signal.SIGKILL)
        (_pids_dir() / f"{self.proc.pid}.pid").unlink(missing_ok=True)
        self.proc = None

    def stop(self) -> None:
        """A clean stop (SIGTERM: it flushes and closes etcd), SIGKILL if it hangs."""
        self._end(signal.SIGTERM, STOP_TIMEOUT_S)

    def kill(self) -> None:
        """A crash: SIGKILL, nothing flushed (what the fault specs do to it)."""
        self._end(signal.SIGKILL, 10)

    def restart(self, timeout: float = START_TIMEOUT_S) -> MilvusServer:
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> MilvusServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Run a Milvus standalone server (the `milvus` package) until Ctrl-C.")
    p.add_argument("--port", type=int, default=19530)
    p.add_argument("--data", default=".milvus-server", help="its data folder (kept between runs)")
    args = p.parse_args(argv)
    server = MilvusServer(args.data, args.port)
    try:
        server.start()
    except ServerUnavailable as e:
        raise SystemExit(f"error: {e}") from None
    print(f"Milvus {package_version()} serving at {server.uri} (data: {server.data_dir}); Ctrl-C stops it", flush=True)
    print(f"  logicroute index DOCS --kb KB --store milvus://127.0.0.1:{server.port}", flush=True)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill PID` stops it as Ctrl-C does
    try:
        while server.running:
            time.sleep(0.5)
        print(f"the server exited: {server.log_tail()}", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
