"""Local registry of submitted jobs: name → job id → run dir, so every command works from any directory.

Stored as JSON lines in $DDPCTL_HOME/registry.jsonl (default ~/.local/state/ddpctl). Appending keeps concurrent
submits safe; a later line for the same job id updates the earlier one (e.g. the local backend's supervisor pid).
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from ddpctl.errors import JobNotFound


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
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)

    def records(self) -> list[JobRecord]:
        """All jobs, newest submission last; later lines for a job id replace earlier ones."""
        by_id: dict[str, JobRecord] = {}
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        fields = set(JobRecord.__dataclass_fields__)
        for line in lines:
            try:
                data = json.loads(line)
                record = JobRecord(**{k: v for k, v in data.items() if k in fields})
            except (json.JSONDecodeError, TypeError):
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
            raise JobNotFound(f"job {ref!r}: no such job id or name in the registry {self.path}; "
                              f"did you mean {guess[0]!r}?")
        known = ", ".join(names[:8]) or "none yet"
        raise JobNotFound(f"job {ref!r}: no such job id or name in the registry {self.path} (names: {known})")
