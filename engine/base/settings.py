"""What every route's settings dataclass offers (LogicConfig, SummaryConfig): a fingerprint that
tells results made under other settings apart, and the help text of each field."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, fields


class Settings:
    """Mixed into a dataclass whose fields carry metadata={"help": ...}."""

    def fingerprint(self) -> str:
        """Short hash of every setting: results made under other settings are not reused."""
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return hashlib.sha1(blob).hexdigest()[:10]

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in fields(cls)}
