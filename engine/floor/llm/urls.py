"""An endpoint's base URL: what it must look like before anything is sent to it, and how it is
shown. `redact` is the one way an LLM spec or URL reaches an error, a log line, /health, a trace
or a card: a password in `http://user:pass@host` or a `?api_key=` must never be printed."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from engine.floor.base.errors import LogicRouteError

HIDDEN = "***"
# userinfo after a scheme: http://user:pass@host -> http://***@host
_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^\s/?#@'\"]+@")
# userinfo of a spec's base URL without a scheme: openai:m@user:pass@host -> openai:m@***@host
_BARE_USERINFO = re.compile(r"(?<=@)[^\s/?#@'\"]+@")
# a query parameter (or a bare key=value) whose name ends in a word for a credential
# (api_key, access_token, client_secret; not max_prompt_tokens)
_SECRET_PARAM = re.compile(
    r"(?P<name>(?:^|(?<=[?&;\s'\"]))[\w.-]*(?:key|token|secret|passw(?:or)?d|pwd|auth|signature|sig|credentials?))"
    r"=(?P<value>[^&#\s'\"]+)",
    re.IGNORECASE,
)


def redact(text: str) -> str:
    """`text` (an LLM spec, a URL, or a message holding them) with URL credentials and secret
    query values replaced by ***. The rest stays, so a reader still sees which endpoint it was."""
    text = _USERINFO.sub(rf"\g<scheme>{HIDDEN}@", text)
    text = _BARE_USERINFO.sub(f"{HIDDEN}@", text)
    return _SECRET_PARAM.sub(rf"\g<name>={HIDDEN}", text)


def check_base_url(url: str, where: str) -> str:
    """The URL, or a LogicRouteError before any try: an endpoint must be an http(s) URL with a
    host (a typo would otherwise be retried with backoff before the client names the problem).
    `where` names the URL's source in the message."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError on a port that is not a number
    except ValueError as e:
        raise LogicRouteError(f"bad base URL {redact(url)!r} in {where}: {e}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LogicRouteError(
            f"bad base URL {redact(url)!r} in {where}: expected http://HOST[:PORT]/PATH or https://..."
        )
    return url
