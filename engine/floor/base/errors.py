"""Typed exceptions. The CLI turns every LogicRouteError into a one-line message."""


class LogicRouteError(Exception):
    """Base class: anything a user can cause or fix."""


class BadQuestionError(LogicRouteError):
    """Empty, whitespace-only or over-budget question."""


class KBError(LogicRouteError):
    """Knowledge base missing, corrupt, or built differently."""


class KBNotFoundError(KBError):
    pass


class StoreUnavailableError(KBError):
    """The KB's vector store (a Milvus server) does not answer: down, restarting, unreachable.
    Transient, unlike the KB's own faults: the same call may succeed once it is back (serve
    answers 503, not 500)."""


class KBCorruptError(KBError):
    pass


class KBReadOnlyError(KBError):
    """A write to a knowledge base whose folder or files this process may not change."""


class KBEmptyError(KBError):
    """A knowledge base with no chunks asked to answer."""


class DocumentNotFoundError(KBError):
    """Document ids that are not in the knowledge base."""


class DocumentIdConflictError(LogicRouteError):
    """Two different files claim one document id (hierarchy.kb_intake): refused, never resolved silently."""


class EmbedderMismatchError(KBError):
    """A KB or checkpoint was built with another embedder."""


class UnknownFormatError(LogicRouteError):
    """An input file in no supported format."""


class DataFormatError(LogicRouteError):
    """A malformed record inside a supported format (names file and line)."""


class ConfigError(LogicRouteError):
    """A configuration (engine.core.config.RagConfig: a file, a --set pair) with an unknown key or a bad value."""


class LLMError(LogicRouteError):
    """The LLM could not be reached or kept failing after retries."""


class DeadlineError(LLMError):
    """An LLM call cut, or not started, by the answer's own time limit: the caller's choice, not
    a failure of the endpoint (so it never opens the circuit breaker)."""


class StructuredOutputError(LLMError):
    """The LLM's output did not validate against the schema, even after one retry.

    `completions` holds every attempt so callers can still count their tokens."""

    def __init__(self, message: str, completions: list | None = None):
        super().__init__(message)
        self.completions = completions or []


class MissingExtraError(LogicRouteError):
    """An optional extra that a file or a command needs is not installed; the message names the
    pip command that installs it."""


class ModelFilesError(LogicRouteError):
    """The local model's files are missing or fail their checksum."""


class CheckpointError(LogicRouteError):
    """A router checkpoint is missing, malformed or does not match the embedder."""
