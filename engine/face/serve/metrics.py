"""GET /metrics: what the server has done since it started, per route.

Latency percentiles come from the last LATENCY_WINDOW answers of each route (a bounded window:
a server that runs for weeks must not grow a list per request)."""

from __future__ import annotations

import statistics
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from engine.floor.base.stats import percentile

LATENCY_WINDOW = 2048


@dataclass
class RouteStats:
    answers: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: deque = field(default_factory=lambda: deque(maxlen=LATENCY_WINDOW))

    def to_dict(self) -> dict:
        s = list(self.seconds)
        return {
            "answers": self.answers,
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "latency_seconds": {
                "p50": round(percentile(s, 0.5), 4),
                "p95": round(percentile(s, 0.95), 4),
                "mean": round(statistics.fmean(s), 4) if s else 0.0,
                "window": len(s),
            },
        }


class ServerMetrics:
    """Thread-safe counters: answers and their cost per route, errors per status code, route
    decisions, and the queue's state (read from the admission gate when asked)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = time.time()
        self.routes: dict[str, RouteStats] = {}
        self.errors: dict[int, int] = {}
        self.decisions = 0
        self.documents_added = 0
        self.documents_deleted = 0

    def answered(self, route: str, seconds: float, usage) -> None:
        with self._lock:
            st = self.routes.setdefault(route, RouteStats())
            st.answers += 1
            st.llm_calls += usage.llm_calls
            st.prompt_tokens += usage.prompt_tokens
            st.completion_tokens += usage.completion_tokens
            st.seconds.append(seconds)

    def failed(self, status: int) -> None:
        with self._lock:
            self.errors[status] = self.errors.get(status, 0) + 1

    def decided(self) -> None:
        with self._lock:
            self.decisions += 1

    def documents(self, added: int = 0, deleted: int = 0) -> None:
        with self._lock:
            self.documents_added += added
            self.documents_deleted += deleted

    def mean_answer_seconds(self) -> float:
        """Over every route's recent answers; what Retry-After is estimated from."""
        with self._lock:
            s = [x for st in self.routes.values() for x in st.seconds]
        return statistics.fmean(s) if s else 1.0

    def to_dict(self, queue: dict | None = None) -> dict:
        with self._lock:
            routes = {r: st.to_dict() for r, st in sorted(self.routes.items())}
            errors = {str(k): v for k, v in sorted(self.errors.items())}
            return {
                "uptime_seconds": round(time.time() - self.started, 1),
                "answers": sum(st.answers for st in self.routes.values()),
                "routes": routes,
                "route_decisions": self.decisions,
                "errors": errors,
                "documents": {"added": self.documents_added, "deleted": self.documents_deleted},
                "queue": queue or {},
            }
