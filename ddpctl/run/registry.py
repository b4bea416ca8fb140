"""Local registry of submitted jobs: name → job id → run dir, so every command works from any directory.

Stored as JSON lines in $DDPCTL_HOME/registry.jsonl (default ~/.local/state/ddpctl). Appending keeps concurrent
submits safe; a later line for the same job id updates the earlier one (e.g. the local backend's supervisor pid).
"""

from __future__ import annotations

import difflib
import fcntl
import hashlib
import json
import math
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from ddpctl import safeio
from ddpctl.errors import DdpctlError, JobNotFound

# Private: the registry names every run dir and spec of this user. Opened without following a symlink, like
# every file ddpctl writes, so a link planted in a shared DDPCTL_HOME cannot redirect the appends.
REGISTRY_MODE = 0o600


@dataclass(frozen=True)
class JobRecord:
    job_id: str
    name: str
    run_dir: str
    backend: str
    submitted_at: float
    spec_path: str = ""
    pid: int | None = None  # local backend: the supervisor's pid
    final_state: str | None = None  # set once a terminal state is known
    sweep: str | None = None  # a sweep's task: its array job id (ddpctl.run.sweeps)
    point: str | None = None  # a sweep's task: its point's overrides, as `ddpctl sweep --dry-run` lists them


def registry_home(env: Mapping[str, str]) -> Path:
    if env.get("DDPCTL_HOME"):
        return Path(env["DDPCTL_HOME"])
    state = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".local" / "state")
    return Path(state) / "ddpctl"


class Registry:
    def __init__(self, home: Path) -> None:
        self.path = home / "registry.jsonl"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Registry:
        return cls(registry_home(os.environ if env is None else env))

    def add(self, record: JobRecord) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(asdict(record), sort_keys=True) + "\n").encode()
        with self.locked(exclusive=False):  # appends run side by side; only a prune's rewrite waits for them
            fd = safeio.open_append(self.path, REGISTRY_MODE)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def add_all(self, records: list[JobRecord]) -> None:
        """`add` of many records (a sweep's tasks) in one append: all of them or, on an error, none."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = b"".join((json.dumps(asdict(r), sort_keys=True) + "\n").encode() for r in records)
        with self.locked(exclusive=False):
            fd = safeio.open_append(self.path, REGISTRY_MODE)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)

    @contextmanager
    def locked(self, *, exclusive: bool) -> Iterator[None]:
        """The registry file's lock: shared for an append, exclusive for a rewrite (`rewrite`), so no line
        appended while a prune rewrites the file is lost."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        lock = self.path.with_name(f".{self.path.name}.lock")
        fd = safeio.open_fd(lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    def rewrite(self, records: list[JobRecord]) -> None:
        """Rewrite the registry with exactly `records` (one line each), atomically. The caller holds
        `locked(exclusive=True)` from its read to here."""
        data = b"".join((json.dumps(asdict(r), sort_keys=True) + "\n").encode() for r in records)
        safeio.write_bytes_atomic(self.path, data, mode=REGISTRY_MODE, durable=True)

    def refs(self) -> list[str]:
        """Every job name and id, newest first, without parsing each record: shell completion asks this on
        every TAB, linear in the registry's size (100,000 lines in a few hundredths of a second)."""
        try:
            data = safeio.read_bytes(self.path)
        except OSError:
            return []
        return refs_in(data)

    def newest_refs(self, prefix: str, limit: int) -> list[str]:
        """The newest `limit` job names and ids starting with `prefix`, newest first: the file is read from its end
        in blocks and only as far back as it takes, so one TAB costs the same at 100,000 lines as at 1,000 (a
        prefix that only old jobs have reads further, up to the whole file)."""
        try:
            fd = safeio.open_read(self.path)
        except OSError:
            return []
        try:
            return refs_backwards(fd, os.fstat(fd).st_size, prefix, limit)
        finally:
            os.close(fd)

    @contextmanager
    def name_lock(self, name: str) -> Iterator[None]:
        """Hold this registry's lock for `name` (blocking): `submit` holds it from the duplicate check until the
        job is recorded, so of simultaneous submits of one name only the first runs and the others see it.
        A file per name (hashed: any name makes a safe file name), flock'ed; the kernel drops it on any exit."""
        locks = self.path.parent / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256(name.encode()).hexdigest()[:32]
        fd = safeio.open_fd(locks / f"name-{digest}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def check_writable(self) -> None:
        """Fail before anything is submitted if the registry cannot be written (read-only DDPCTL_HOME, ...):
        a job submitted but never recorded could not be found by status, logs or cancel."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                os.close(safeio.open_fd(self.path, os.O_WRONLY | os.O_APPEND))
            else:  # probe with a file of our own: a rejected submission leaves no registry behind
                probe = self.path.with_name(f".{self.path.name}.probe{os.getpid()}")
                os.close(safeio.open_fd(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, REGISTRY_MODE))
                probe.unlink()
        except OSError as err:
            raise DdpctlError(
                f"registry {self.path} is not writable ({err.strerror or err}): set DDPCTL_HOME to a writable directory"
            ) from err

    def records(self) -> list[JobRecord]:
        """All jobs, newest submission last; later lines for a job id replace earlier ones.

        A damaged line (not UTF-8, not a JSON object, a field of the wrong type) is skipped with one warning
        naming the file and line: one bad line must not take every command down with it.
        """
        by_id: dict[str, JobRecord] = {}
        try:
            lines = self.path.read_bytes().splitlines()
        except (FileNotFoundError, NotADirectoryError):  # no registry there (yet): submit says if it can't be made
            return []
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            record, problem = parse_record(line)
            if record is None:
                warn_once(f"ddpctl: warning: {self.path} line {number}: skipped, {problem}")
                continue
            by_id[record.job_id] = record
        return sorted(by_id.values(), key=lambda r: r.submitted_at)

    def find(self, ref: str) -> JobRecord:
        """A job by id, or the newest job with that name."""
        records = self.records()
        for record in records:
            if record.job_id == ref:
                return record
        named = [r for r in records if r.name == ref]
        if named:
            return named[-1]
        names = sorted({r.name for r in records})
        guess = difflib.get_close_matches(ref, names, n=1, cutoff=0.6)
        if guess:
            raise JobNotFound(
                f"job {ref!r}: no such job id or name in the registry {self.path}; did you mean {guess[0]!r}?"
            )
        known = ", ".join(names[:8]) or "none yet"
        raise JobNotFound(f"job {ref!r}: no such job id or name in the registry {self.path} (names: {known})")


# Registry lines are written by `add` with sorted keys: job_id comes right before name. Names and job ids hold no
# quote or backslash (spec names are [A-Za-z0-9._-]+), so one pattern finds both without a JSON parse.
_REFS = re.compile(rb'"job_id": "([^"\\]*)", "name": "([^"\\]*)"')


def refs_in(data: bytes) -> list[str]:
    """Names and ids in registry text, newest (last) first, each once (pure; linear)."""
    seen: dict[str, None] = {}
    for match in reversed(list(_REFS.finditer(data))):
        for ref in (match.group(2), match.group(1)):
            seen.setdefault(ref.decode(errors="replace"), None)
    return list(seen)


REFS_BLOCK = 1 << 18  # bytes read per step from the end: about 1,300 records


def refs_backwards(fd: int, size: int, prefix: str, limit: int) -> list[str]:
    """`refs_in` of the file's lines from its end until `limit` refs with `prefix` are found."""
    seen: dict[str, None] = {}
    end, carry = size, b""
    while end > 0 and len(seen) < limit:
        start = max(0, end - REFS_BLOCK)
        block = os.pread(fd, end - start, start) + carry
        carry = b""
        if start > 0:  # the bytes before the block's first newline are the end of a line that began earlier
            cut = block.find(b"\n") + 1
            carry, block = block[:cut], block[cut:]
            if not cut:
                carry, block = block, b""
        for ref in refs_in(block):
            if ref.startswith(prefix) and len(seen) < limit:
                seen.setdefault(ref, None)
        end = start
    return list(seen)


_FIELD_TYPES: dict[str, tuple[type, ...]] = {
    "job_id": (str,),
    "name": (str,),
    "run_dir": (str,),
    "backend": (str,),
    "submitted_at": (int, float),
    "spec_path": (str,),
    "pid": (int, type(None)),
    "final_state": (str, type(None)),
    "sweep": (str, type(None)),
    "point": (str, type(None)),
}


_WARNED: set[str] = set()


def warn_once(message: str) -> None:
    """A command may read the registry more than once (lookup, then "did you mean"): one warning per line."""
    if message not in _WARNED:
        _WARNED.add(message)
        print(message, file=sys.stderr)


def parse_record(line: bytes) -> tuple[JobRecord | None, str]:
    """One registry line as a record, or None and why not (pure: the caller warns)."""
    try:
        data = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"not a JSON line ({exc})"
    if not isinstance(data, dict):
        return None, f"not a JSON object but {type(data).__name__}"
    known = {k: v for k, v in data.items() if k in _FIELD_TYPES}
    for key, allowed in _FIELD_TYPES.items():
        if key not in known:
            if key in ("job_id", "name", "run_dir", "backend", "submitted_at"):
                return None, f"{key} is missing"
            continue
        value = known[key]
        if isinstance(value, bool) or not isinstance(value, allowed):
            return None, f"{key} is {value!r}, not {' or '.join(t.__name__ for t in allowed)}"
    submitted = float(known["submitted_at"])
    if not math.isfinite(submitted):
        return None, f"submitted_at is {known['submitted_at']!r}, not a time"
    return JobRecord(**known), ""
