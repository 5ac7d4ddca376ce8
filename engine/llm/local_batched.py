"""Batched greedy decoding for the local model: several free-text calls decoded together.

Decoding on a CPU is bound by memory bandwidth: one pass over the weights yields one token of
one sequence, or one token of each of several. Four sequences in one `llama_decode` give 2.1x
the generated tokens/s of one (runs/batched_decode.md); prompt evaluation is compute-bound and
gains nothing. LocalLLM.chat_many sends here the calls a caller makes at the same time
(HippoRAG's OpenIE, through bench peers); `chat` never comes here.

How: a second llama.cpp context on the loaded model (its weights are shared, not copied), with
MAX_SEQS sequences of one KV stream each, every stream as long as `chat`'s context. A request
takes a free sequence; its prompt is evaluated alone (one prompt per `llama_decode`, in chunks of
the model's n_batch, as `chat` evaluates it); then every step decodes one token of each live
sequence in one batch, and a sequence that ends frees its place for a waiting request.

Each request is what `chat` would make of it: the prompt tokens and stop strings are those
create_chat_completion hands to create_completion (it is run up to that call, see `render`), and
a reply ends as create_completion ends it (`_Seq.take`): at an end-of-generation token (not
counted), at a stop string (the text cut there), or at max_tokens (capped by the context).
Greedy means the highest logit, as `chat`'s sampler at temperature 0 picks it.

Not the same numbers: the batched kernels round differently from one-row decoding (the q4_K
weights are repacked for blocks of rows), so logits differ in the last bits, and where the top
two nearly tie the greedy pick can differ from `chat`'s; after that the texts go separate ways.

A sequence keeps its KV after its request ends: the next request it takes evaluates only what
follows their common prefix (HippoRAG's prompts of one kind share their instructions and example);
where another sequence holds a longer common prefix, its KV is copied first, so a prefix is
evaluated once, not once per sequence.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from engine.base.errors import LLMError
from engine.base.types import Completion

MAX_SEQS = 4  # 4 rows fill the repacked q4_K kernel's blocks; 2 gained only 1.34x (runs/batched_decode.md)
MIN_COPY = 32  # prompt tokens a copied KV stream must save (the copy costs ~30 ms, evaluating 32 tokens ~0.4 s)


class _Rendered(Exception):
    """Raised by the stand-in create_completion to carry what create_chat_completion gave it."""

    def __init__(self, kwargs: dict) -> None:
        super().__init__("rendered")
        self.kwargs = kwargs


def render(llama: Any, messages: list[dict], max_tokens: int) -> tuple[list[int], list[bytes]]:
    """(prompt tokens, stop strings) exactly as `chat` decodes `messages`: the model's chat
    handler renders the template, tokenizes and adds its stop strings, then calls
    create_completion, which is replaced for the moment by one that only keeps its arguments.
    The caller holds the model's lock: no other thread sees the stand-in."""

    def capture(**kwargs: Any) -> None:
        raise _Rendered(kwargs)

    kwargs: dict | None = None
    own = vars(llama).get("create_completion")  # None: the class's method
    llama.create_completion = capture
    try:
        llama.create_chat_completion(messages=messages, temperature=0.0, max_tokens=max_tokens, seed=0)
    except _Rendered as r:
        kwargs = r.kwargs
    finally:
        if own is None:
            del llama.create_completion
        else:
            llama.create_completion = own
    if kwargs is None or not isinstance(kwargs.get("prompt"), list):
        raise LLMError("the local model's chat handler did not hand over prompt tokens: batched decoding unusable")
    stop = kwargs.get("stop") or []
    stop = [stop] if isinstance(stop, str) else stop
    return list(kwargs["prompt"]), [s.encode("utf-8") for s in stop]


@dataclass
class _Seq:
    """One request while it decodes."""

    index: int  # its place among the requests
    prompt: list[int]
    stops: list[bytes]
    max_tokens: int
    tokens: list[int] = field(default_factory=list)  # the reply's tokens (an end-of-generation one never)
    logprobs: list[float] = field(default_factory=list)  # of every sampled token, the final one included
    text: bytes = b""
    finish: str | None = None
    next_token: int = -1  # sampled, not yet fed back
    evaluated: int = 0  # prompt tokens evaluated (the rest was in its sequence's KV)
    work: float = 0.0  # decode seconds: its prompt's, and its share of each step it was in
    multibyte_fix: int = 0

    def take(self, llama: Any, token: int, logprob: float) -> bool:
        """Add a sampled token; whether the reply has ended. Mirrors create_completion's loop
        (llama_cpp/llama.py, Llama._create_completion, non-streaming) step for step."""
        import llama_cpp

        self.logprobs.append(logprob)
        if llama_cpp.llama_vocab_is_eog(llama._model.vocab, token):
            self.text, self.finish = llama.detokenize(self.tokens, prev_tokens=self.prompt), "stop"
            return True
        self.tokens.append(token)
        self.next_token = token
        all_text = llama.detokenize(self.tokens, prev_tokens=self.prompt)
        for k, char in enumerate(all_text[-3:]):  # an incomplete UTF-8 character at the end
            k = 3 - k
            for num, pattern in [(2, 192), (3, 224), (4, 240)]:
                if num > k and pattern & char == pattern:
                    self.multibyte_fix = num - k
        if self.multibyte_fix > 0:  # as there: no stop string or length check until it is complete
            self.multibyte_fix -= 1
            return False
        hit = [s for s in self.stops if s in all_text]
        if hit:
            self.text, self.finish = all_text[: all_text.index(hit[0])], "stop"
            return True
        if len(self.tokens) >= self.max_tokens:
            self.text, self.finish = all_text, "length"
            return True
        return False


def _common(held: list[int], prompt: list[int]) -> int:
    """How much of `prompt` a sequence holding `held` need not evaluate: their common prefix, less
    at least the prompt's last token, whose logits give the reply's first token."""
    n, end = 0, min(len(held), len(prompt) - 1)
    while n < end and held[n] == prompt[n]:
        n += 1
    return n


class BatchedDecoder:
    """The second context on a loaded llama_cpp.Llama and what each of its sequences holds. Made
    once per model (kept on it), used under the model's lock."""

    def __init__(self, llama: Any) -> None:
        import llama_cpp

        self.n_ctx = llama.n_ctx()  # each sequence's context: chat's
        self.n_batch = llama.n_batch
        params = llama_cpp.llama_context_params.from_buffer_copy(llama.context_params)
        params.n_ctx = self.n_ctx * MAX_SEQS
        params.n_seq_max = MAX_SEQS
        params.kv_unified = False  # one KV stream per sequence: attention reads its own cells only
        params.n_batch = params.n_ubatch = self.n_batch
        self.ctx = llama_cpp.llama_init_from_model(llama._model.model, params)
        if not self.ctx:
            raise LLMError("cannot make a batched context on the local model (out of memory?)")
        self.batch = llama_cpp.llama_batch_init(max(self.n_batch, MAX_SEQS), 0, 1)
        self.mem = llama_cpp.llama_get_memory(self.ctx)
        self.n_vocab = llama.n_vocab()
        self.held: list[list[int]] = [[] for _ in range(MAX_SEQS)]  # the tokens each sequence's KV holds

    def _decode(self, items: list[tuple[int, int, int, bool]]) -> None:
        """One llama_decode of (token, position, sequence, wants logits) items."""
        import llama_cpp

        b = self.batch
        b.n_tokens = len(items)
        for i, (token, pos, seq, logits) in enumerate(items):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, logits
            b.seq_id[i][0] = seq
        rc = llama_cpp.llama_decode(self.ctx, b)
        if rc != 0:
            llama_cpp.llama_memory_clear(self.mem, True)
            self.held = [[] for _ in range(MAX_SEQS)]
            raise LLMError(f"batched decoding failed (llama_decode returned {rc})")

    def _pick(self, row: int) -> tuple[int, float]:
        """(greedy token, its log-probability) from the logits of output `row` of the last decode."""
        import llama_cpp
        import numpy as np

        logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(self.ctx, row), shape=(self.n_vocab,))
        token = int(np.argmax(logits))  # the first of equal maxima, as llama.cpp's greedy sampler
        top = float(logits[token])
        return token, float(-np.log(np.exp(logits.astype(np.float64) - top).sum()))

    def _admit(self, s: _Seq, slot: int, llama: Any) -> bool:
        """Evaluate s's prompt in sequence `slot` (after the prefix it already holds) and take its
        first token; whether s has ended already."""
        import llama_cpp

        t0 = time.perf_counter()
        shared = {i: _common(self.held[i], s.prompt) for i in range(MAX_SEQS)}
        source = max(shared, key=lambda i: (shared[i], i == slot))
        if shared[source] >= shared[slot] + MIN_COPY:
            # another sequence holds a longer prefix: copy its KV stream (a whole stream is copied,
            # at the next decode, before that decode's tokens) and keep the shared part
            llama_cpp.llama_memory_seq_cp(self.mem, source, slot, -1, -1)
            self.held[slot] = list(self.held[source])
        keep = _common(self.held[slot], s.prompt)
        if not llama_cpp.llama_memory_seq_rm(self.mem, slot, keep, -1):
            llama_cpp.llama_memory_seq_rm(self.mem, slot, -1, -1)
            keep = 0
        self.held[slot] = held = self.held[slot][:keep]
        for start in range(keep, len(s.prompt), self.n_batch):
            chunk = s.prompt[start : start + self.n_batch]
            last = start + len(chunk) == len(s.prompt)
            self._decode([(t, start + j, slot, last and j == len(chunk) - 1) for j, t in enumerate(chunk)])
            held.extend(chunk)
        s.evaluated = len(s.prompt) - keep
        token, logprob = self._pick(-1)  # the last chunk's last token: its only output
        s.work += time.perf_counter() - t0
        return s.take(llama, token, logprob)

    def run(self, llama: Any, seqs: list[_Seq]) -> None:
        """Decode every request to its end, MAX_SEQS at a time; the others wait for a free place."""
        waiting = list(seqs)
        live: dict[int, _Seq] = {}  # sequence id -> its request
        while waiting or live:
            for slot in [i for i in range(MAX_SEQS) if i not in live]:
                while waiting:  # a request that ends on its first token leaves the place free
                    s = waiting.pop(0)
                    if not self._admit(s, slot, llama):
                        live[slot] = s
                        break
            if not live:
                continue
            order = sorted(live)
            t0 = time.perf_counter()
            self._decode([(live[i].next_token, len(self.held[i]), i, True) for i in order])
            share = (time.perf_counter() - t0) / len(order)
            for row, i in enumerate(order):
                s = live[i]
                self.held[i].append(s.next_token)
                s.work += share
                if s.take(llama, *self._pick(row)):
                    del live[i]


def decode_many(llama: Any, requests: list[list[dict]], max_tokens: int, name: str) -> list[Completion | LLMError]:
    """Every request (messages already neutralised) decoded together on `llama`; the caller holds
    the model's lock. A completion's seconds are its share of the whole call's wall time, in
    proportion to its decode work (its prompt, and an equal part of each step it was in)."""
    t0 = time.perf_counter()
    decoder = getattr(llama, "_logicroute_batched", None)
    if decoder is None:
        decoder = llama._logicroute_batched = BatchedDecoder(llama)
    out: list[Completion | LLMError | None] = [None] * len(requests)
    seqs: list[_Seq] = []
    for i, messages in enumerate(requests):
        prompt, stops = render(llama, messages, max_tokens)
        if len(prompt) >= decoder.n_ctx:  # create_completion's own check and message
            out[i] = LLMError(
                f"prompt too long for {name}: Requested tokens ({len(prompt)}) exceed context window of "
                f"{decoder.n_ctx}; shorten the question or the retrieved context"
            )
            continue
        cap = max_tokens if max_tokens > 0 and max_tokens + len(prompt) < decoder.n_ctx else decoder.n_ctx - len(prompt)
        seqs.append(_Seq(i, prompt, stops, cap))
    decoder.run(llama, seqs)
    wall = time.perf_counter() - t0
    work = sum(s.work for s in seqs) or 1.0
    for s in seqs:
        out[s.index] = Completion(
            text=s.text.decode("utf-8", errors="ignore"),
            prompt_tokens=len(s.prompt),
            completion_tokens=len(s.tokens),
            seconds=wall * s.work / work,
            model=name,
            prompt_tokens_evaluated=s.evaluated,
            token_logprobs=s.logprobs[:-1],  # as chat's: the final sampled token has none
            finish_reason=s.finish,
        )
    return [c for c in out if c is not None]
