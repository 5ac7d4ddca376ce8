"""What every route's settings dataclass offers (LogicConfig, SummaryConfig): a fingerprint that
tells results made under other settings apart, and the help text of each field."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, fields


class Settings:
    """Mixed into a dataclass whose fields carry metadata={"help": ...}."""

    def fingerprint(self) -> str:
        """Short hash of every setting: results made under other settings are not reused. A field
        added later names its "neutral" value in its metadata, the one that leaves the route as it
        was before the field existed; holding it, the field is left out of the hash, so adding a
        switch keeps every stored answer valid (benchmark answer stores, label runs)."""
        neutral = {f.name: f.metadata["neutral"] for f in fields(self) if "neutral" in f.metadata}
        kept = {k: v for k, v in self.fingerprint_values().items() if not (k in neutral and v == neutral[k])}
        blob = json.dumps(kept, sort_keys=True).encode()
        return hashlib.sha1(blob).hexdigest()[:10]

    def fingerprint_values(self) -> dict:
        """What the fingerprint hashes: every field."""
        return asdict(self)

    @classmethod
    def help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in fields(cls)}
