"""Twenty documentation questions on the Node.js API reference that the `nodejs` Debian package
installs as Markdown (/usr/share/doc/nodejs/api/*.md), each answered under one named heading:
what `logicroute bench retrieval` scores as hit@3 of that heading (training.retrieval.bench_retrieval).

Written for this benchmark (issue 42) as a user asks: about half name the function, option or
section they are after, the others describe what they want done. Each heading occurs once in the
folder (checked when the benchmark runs). Heading text is as the KB's heading paths carry it:
markup left out (hierarchy.chunking.markdown_blocks)."""

from __future__ import annotations

DOCS_FOLDER = "/usr/share/doc/nodejs/api"

# (question, file, heading)
DOC_QUESTIONS: tuple[tuple[str, str, str], ...] = (
    ("How do I get the relative path from one directory to another?", "path.md", "path.relative(from, to)"),
    ("What does path.extname return for a file name without a dot?", "path.md", "path.extname(path)"),
    ("How can I split a file path into its root, dir, base, ext and name?", "path.md", "path.parse(path)"),
    (
        "How do I add a listener that runs only the first time an event fires?",
        "events.md",
        "emitter.once(eventName, listener)",
    ),
    ("What happens when an EventEmitter emits 'error' and nobody listens for it?", "events.md", "Error events"),
    (
        "How do I raise the limit of 10 listeners per event behind the memory leak warning?",
        "events.md",
        "emitter.setMaxListeners(n)",
    ),
    (
        "How do I run a .bat or .cmd file on Windows from child_process?",
        "child_process.md",
        "Spawning .bat and .cmd files on Windows",
    ),
    ("What does the detached option of spawn do to the child process?", "child_process.md", "options.detached"),
    ("Which exit code does Node use when an uncaught exception kills the process?", "process.md", "Exit codes"),
    (
        "Should I use queueMicrotask or process.nextTick to defer a callback?",
        "process.md",
        "When to use queueMicrotask() vs. process.nextTick()",
    ),
    (
        "How do I give the V8 old generation more memory from the command line?",
        "cli.md",
        "--max-old-space-size=SIZE (in MiB)",
    ),
    (
        "How can stack traces point at my original TypeScript lines instead of the compiled JavaScript?",
        "cli.md",
        "--enable-source-maps",
    ),
    ("How do I turn a callback-style function into one that returns a promise?", "util.md", "util.promisify(original)"),
    ("How do I cancel a timeout before it fires?", "timers.md", "clearTimeout(timeout)"),
    ("How do I read one query string parameter of a URL?", "url.md", "urlSearchParams.get(name)"),
    (
        "Which encodings can a Buffer convert strings to and from, like base64 or hex?",
        "buffer.md",
        "Buffers and character encodings",
    ),
    ("What does require do when it is given a folder instead of a file?", "modules.md", "Folders as modules"),
    ("Where should my program put temporary files?", "os.md", "os.tmpdir()"),
    ("How do I generate cryptographically strong random bytes?", "crypto.md", "crypto.randomBytes(size[, callback])"),
    ("How does a worker thread receive the data it was started with?", "worker_threads.md", "worker.workerData"),
)
