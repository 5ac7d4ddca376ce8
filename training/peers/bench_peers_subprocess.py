"""Peers that run in a virtual environment of their own: the harness side of the peer protocol
(training/peers/peer_runners/protocol.py has the runner side and the message shapes).

A SubprocessPeer starts its runner script with the peer venv's Python and serves the runner's
LLM and embedding requests from the harness's own LLM (engine.floor.llm: the same model, the same
call cache) and embedder (MiniLM), adding every call's tokens to the cost of the command
that made it. The peers' packages are never imported here: this file only starts a process."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from engine.floor.base.errors import LLMError, LogicRouteError
from engine.floor.base.types import Usage
from training.peers.bench_peers import (
    ADAPTED_SYSTEM,
    IndexCost,
    PeerAdapter,
    PeerAnswer,
    PeerContext,
    Progress,
    route_adapter,
    uncached_seconds,
)

RUNNERS = Path(__file__).resolve().parent / "peer_runners"
WORK = Path(__file__).resolve().parents[3]  # the folder that holds the repository


class SubprocessPeer(PeerAdapter):
    """A peer behind a runner script. Subclasses name the runner, the pip requirements, and the
    environment variable and default folder of the venv it is installed in."""

    runner = ""
    runner_modules: tuple[str, ...] = ("protocol.py",)  # what the runner imports from beside it: its code too
    requirements: tuple[str, ...] = ()  # what `pip install` needs in the peer's venv, pinned
    venv_env = "LOGICROUTE_PEERS_VENV"
    venv_default = WORK / "peers-venv"
    incremental = True

    def __init__(self, ctx: PeerContext):
        super().__init__(ctx)
        self.proc: subprocess.Popen | None = None
        self.hello: dict = {}
        self.store_id = ""  # what the rows are signed with (store_identity), set when the runner starts
        self.failed_calls = 0  # LLM calls the harness could not serve (an indexing error each)
        self.last_failure = ""

    # --- the process --------------------------------------------------------------------

    def python(self) -> Path:
        venv = Path(self.ctx.options.get(f"{self.name}_venv") or os.environ.get(self.venv_env) or self.venv_default)
        py = venv / "bin" / "python"
        if not py.is_file():
            pins = " ".join(f"'{r}'" for r in self.requirements)
            raise LogicRouteError(
                f"{self.name}: no Python at {py}; install the peer in a venv of its own: "
                f"python -m venv {venv} && {venv}/bin/pip install {pins} (or set ${self.venv_env})"
            )
        return py

    def _embedder(self):
        if self.ctx.embedder is None:
            from engine.floor.embedder import get_embedder

            self.ctx.embedder = get_embedder()
        return self.ctx.embedder

    def _start(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            return
        log = open(self.ctx.workdir / "runner.log", "a")  # noqa: SIM115 - the runner writes here while it runs
        self.proc = subprocess.Popen(
            [str(self.python()), str(RUNNERS / self.runner)],  # cwd below: paths sent to it are absolute
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            cwd=self.ctx.workdir,
        )
        log.close()
        settings = {**self.peer_settings(), **self.ctx.options.get(self.name, {})}
        # one store per setup (the run's LLM and passages, the code of the runner and of the modules it
        # imports, its settings): a peer finds no index built otherwise, whose cost would not be this run's
        code = [(RUNNERS / f).read_text() for f in (self.runner, *self.runner_modules)]
        setup = json.dumps([self.ctx.setup, code, settings], sort_keys=True)
        store = self.ctx.workdir / f"store-{hashlib.sha1(setup.encode()).hexdigest()[:10]}"
        store.mkdir(exist_ok=True)
        self.store_id = store_identity(store)
        self.hello, _ = self._command(
            "hello", workdir=str(store.resolve()), embedding_dim=self._embedder().dim, settings=settings
        )
        package = f"{self.hello.get('package')}=={self.hello.get('version')}"
        check_store_setup(store, {"package": package, "embedder": self._embedder().spec or "MiniLM"})

    def peer_settings(self) -> dict:
        """Settings the harness sets for every peer: the short answer style."""
        from engine.floor.prompts.answer import SHORT_ANSWER_RULE

        return {"answer_instruction": SHORT_ANSWER_RULE} if self.ctx.style == "short" else {}

    def _command(self, op: str, **args) -> tuple[dict, Usage]:
        """Send one command and serve the runner's requests until its result; (result, usage of
        the LLM calls it made). A command that failed in the runner raises PeerError."""
        assert self.proc is not None and self.proc.stdin is not None and self.proc.stdout is not None
        usage = Usage()
        self._send({"op": op, **args})
        while True:
            line = self.proc.stdout.readline()
            if not line:
                self.proc.wait()
                self.proc = None
                raise LogicRouteError(f"{self.name} runner exited during {op}: see {self.ctx.workdir / 'runner.log'}")
            msg = json.loads(line)
            if "rpc" in msg:
                self._send(self._serve(msg, usage))
            elif "error" in msg:
                raise PeerError(msg["error"], usage)
            else:
                return msg.get("result") or {}, usage

    def _send(self, obj: dict) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()

    def _serve(self, msg: dict, usage: Usage) -> dict:
        try:
            if msg["rpc"] == "embed":
                return {"vectors": self._embedder().encode(msg["texts"]).tolist()}
            # A JSON request goes as free text (the peer's prompt asks for JSON and the peer parses
            # it), on every backend alike: engine.floor.llm's OpenAI backend would send a JSON schema,
            # which llama.cpp's server rejects (HTTP 500), and its breaker then refuses the retry.
            c = self.ctx.llm.chat(msg["messages"], max_tokens=int(msg.get("max_tokens") or 512))
            usage.add(c)
            # with its finish reason ("length": cut at max_tokens), which a peer may act on (HippoRAG
            # repairs a cut extraction's JSON); protocol.Channel.llm reads the text alone
            return {"text": c.text, "finish_reason": c.finish_reason or "stop"}
        except LLMError as e:  # the peer sees a failed call, as from an endpoint; it is counted
            usage.llm_calls += 1
            self.failed_calls += 1
            self.last_failure = f"{type(e).__name__}: {e}"
            return {"error": self.last_failure}

    def close(self) -> None:
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                self._command("close")
                self._send({"op": "quit"})
                self.proc.wait(timeout=60)
        except (LogicRouteError, OSError, subprocess.TimeoutExpired):
            self.proc.kill()
        self.proc = None

    # --- the contract -------------------------------------------------------------------

    def settings(self) -> dict:
        self._start()
        return {
            "package": f"{self.hello.get('package')}=={self.hello.get('version')}",
            "embedder": self._embedder().spec or "MiniLM",
            **self.hello.get("settings", {}),
            # the rows' signature follows the store: rows of a store another runner built (the
            # runner's code is part of its name) would count passages the new store lacks
            "store": self.store_id,
        }

    def index(self, passages: Sequence, progress: Progress) -> IndexCost:
        self._start()
        before = self.failed_calls
        t0 = time.perf_counter()
        batch = [{"id": p.id, "title": p.title, "text": p.text} for p in passages]
        try:
            result, u = self._command("index", passages=batch)
        except PeerError as e:
            raise LogicRouteError(f"{self.name} index: {e}") from None
        ids = {p.id for p in passages}
        failed = len(ids & set(result.get("failed", [])))
        progress(len(passages), len(passages))
        return IndexCost(
            u.llm_calls, u.prompt_tokens, u.completion_tokens, uncached_seconds(time.perf_counter() - t0, u),
            len(passages), failed, self.failed_calls - before, u.cached_calls,
        )  # fmt: skip

    def answer(self, question: str) -> PeerAnswer:
        t0 = time.perf_counter()
        before = self.failed_calls
        try:
            self._start()
            result, u = self._command("answer", question=question)
            error = None
        except PeerError as e:
            result, u, error = {}, e.usage, str(e)
        except LogicRouteError as e:  # the runner died: the next question starts a new one
            result, u, error = {}, Usage(), str(e)
        text = str(result.get("text") or "").strip()
        if error is None and self.failed_calls > before:  # a peer may swallow a failed call and answer "None"
            error = f"{self.failed_calls - before} LLM call(s) failed: {self.last_failure}"
        seconds = uncached_seconds(time.perf_counter() - t0, u)
        return PeerAnswer(text, u.llm_calls, u.prompt_tokens, u.completion_tokens, seconds, error)


def store_identity(store: Path) -> str:
    """What a peer's rows are signed with: the store's name, and the id written into it when it
    was made, so a store deleted and made again is another store (rows of the old one would count
    passages it lacks). A store made before ids were written is known by its name alone, so its
    rows keep their signature."""
    import uuid

    from engine.floor.base.files import atomic_write_text

    marker = store / ".store_id"
    if marker.is_file():
        return f"{store.name}#{marker.read_text().strip()}"
    if any(store.iterdir()):
        return store.name
    made = uuid.uuid4().hex[:8]
    atomic_write_text(marker, made)
    return f"{store.name}#{made}"


def check_store_setup(store: Path, made_by: dict) -> None:
    """A store answers only to the package version and embedder that built it (recorded at its
    first start). They sign the rows but do not name the store: rows signed otherwise would send
    every passage again to a store that holds them, which the peer skips at no cost, and the index
    would read as nearly free."""
    from engine.floor.base.files import atomic_write_json

    marker = store / ".store_setup.json"
    if not marker.is_file():
        atomic_write_json(marker, made_by)
        return
    was = json.loads(marker.read_text())
    if was != made_by:
        raise LogicRouteError(
            f"{store} was built with {was}, this run has {made_by}: delete the store to build it again, "
            "or run the peer as it was"
        )


class PeerError(LogicRouteError):
    """A command that failed inside the runner; `usage`: the LLM calls it made before."""

    def __init__(self, message: str, usage: Usage):
        super().__init__(message)
        self.usage = usage


class LightRAGAdapter(SubprocessPeer):
    name = "lightrag"
    runner = "lightrag_runner.py"
    requirements = ("lightrag-hku==1.5.7",)


class HippoRAGAdapter(SubprocessPeer):
    name = "hipporag"
    runner = "hipporag_runner.py"
    # pyarrow: hipporag saves its embedding stores as parquet, and the newest pyarrow the resolver
    # picks needs NumPy 2 while vllm holds NumPy at 1.26
    requirements = ("hipporag==2.0.0a3", "pyarrow<20")
    venv_env = "LOGICROUTE_HIPPORAG_VENV"
    venv_default = WORK / "peers-venv-hipporag"  # its torch/vllm/openai pins clash with LightRAG's


class NanoGraphRAGAdapter(SubprocessPeer):
    name = "nano-graphrag"
    runner = "nano_graphrag_runner.py"
    runner_modules = ("protocol.py", "lightrag_runner.py")  # its tokenizer and delimiter repair
    requirements = ("nano-graphrag==0.0.8.2",)
    venv_env = "LOGICROUTE_NANO_GRAPHRAG_VENV"
    venv_default = WORK / "peers-venv-nano"  # its numpy<2 (via graspologic) and dspy/litellm stay apart


class GraphRAGAdapter(SubprocessPeer):
    name = "graphrag"
    runner = "graphrag_runner.py"
    runner_modules = ("protocol.py", "lightrag_runner.py")  # its tokenizer and delimiter repair
    requirements = ("graphrag==3.3.0",)
    venv_env = "LOGICROUTE_GRAPHRAG_VENV"
    venv_default = WORK / "peers-venv-graphrag"  # its LiteLLM, spaCy, LanceDB and pandas 3 stay apart
    # one build over every passage: GraphRAG's update run would index each batch as a graph of its
    # own, with communities that never span two batches (the runner says more)
    incremental = False


def builtin_registry() -> dict[str, Callable[[PeerContext], PeerAdapter]]:
    """System name -> factory: logicroute's routes, and the peers that run in a venv of their own."""
    reg: dict[str, Callable[[PeerContext], PeerAdapter]] = {r: route_adapter(r) for r in ("chunk", "logic", "router")}
    reg[ADAPTED_SYSTEM] = route_adapter("router", ADAPTED_SYSTEM)
    reg["lightrag"] = LightRAGAdapter
    reg["hipporag"] = HippoRAGAdapter
    reg["nano-graphrag"] = NanoGraphRAGAdapter
    reg["graphrag"] = GraphRAGAdapter
    return reg
