"""What a submission says, as one typed record: the job, where it runs, what `submit` prints about it and the
submit policy's warnings. It is built where the job was submitted (here, or on the login node of a remote
submit, which answers it as JSON: ddpctl.cli.remote_internal) and printed from its fields in both places, so a
remote submission is shown from what the cluster's submission returned, never from another process's stdout."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ddpctl.errors import RemoteError

if TYPE_CHECKING:
    from ddpctl.api.handle import Job
    from ddpctl.plan.submission import SubmissionPlan

TEXT_FIELDS = ("job_id", "name", "backend", "run_dir", "script")
LIST_FIELDS = ("code", "warnings", "notes")


@dataclass(frozen=True)
class SubmitOutcome:
    job_id: str
    name: str
    backend: str
    run_dir: str  # a path where the job was submitted (on a cluster: the cluster's)
    script: str  # relative paths in a spec file start at its directory: `submit` says where that was
    requeue: str | None  # "<mode> (<why>)", None: the spec disables it
    code: tuple[str, ...] = ()  # the code snapshot's summary, then what it left out
    warnings: tuple[str, ...] = ()  # the submit policy's (printed apart, to stderr, by the CLI)
    notes: tuple[str, ...] = ()  # what was done beside it (a cluster's code store pruned)

    def lines(self) -> list[str]:
        """What `submit` prints about the job, before its `logs:` line (which names where to ask)."""
        requeue = f"requeue:  {self.requeue}" if self.requeue is not None else "requeue:  disabled in the spec"
        return [
            f"submitted {self.name}: job {self.job_id} ({self.backend})",
            f"script:   {self.script}",
            f"run dir:  {self.run_dir}",
            requeue,
            *self.code,
            *self.notes,
        ]

    def as_json(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}


def outcome_of(job: Job, submission: SubmissionPlan, warnings: Sequence[str] = ()) -> SubmitOutcome:
    """The outcome of a submission made here: read from the job, its plan and its run dir's snapshot record."""
    requeue = submission.spec.requeue
    return SubmitOutcome(
        job_id=job.job_id,
        name=job.name,
        backend=job.backend,
        run_dir=str(job.run_dir),
        script=str(submission.spec.script),
        requeue=f"{requeue.mode} ({submission.requeue_why})" if requeue.enabled else None,
        code=tuple(code_lines(str(job.run_dir))),
        warnings=tuple(warnings),
    )


def code_lines(run_dir: str) -> list[str]:
    """The run's code snapshot as `submit` reports it: its summary and script, then what it left out."""
    from ddpctl.run.layout import RunLayout
    from ddpctl.snapshot import left_out_lines, read_info, summary

    info = read_info(RunLayout(Path(run_dir)).snapshot_file)
    if info is None:
        return [summary(None)]
    return [f"{summary(info)}; runs {info.script}", *left_out_lines(info.skipped, info.left_out)]


def outcome_from(data: Mapping[str, Any], cluster: str) -> SubmitOutcome:
    """The outcome a cluster's login node answered (`as_json`), each field checked to be what it must be; a
    RemoteError in one line when it is not. The text is kept as sent: it is made visible where it is shown."""
    text = {key: data.get(key) for key in TEXT_FIELDS}
    lists = {key: data.get(key, []) for key in LIST_FIELDS}
    requeue = data.get("requeue")
    wrong = [key for key, value in text.items() if not isinstance(value, str)]
    wrong += [key for key, value in lists.items() if not (isinstance(value, list) and all_text(value))]
    wrong += [] if requeue is None or isinstance(requeue, str) else ["requeue"]
    if wrong:
        raise RemoteError(f"cluster {cluster!r}: its submission answered no {', '.join(wrong)} as expected")
    return SubmitOutcome(
        job_id=data["job_id"],
        name=data["name"],
        backend=data["backend"],
        run_dir=data["run_dir"],
        script=data["script"],
        requeue=requeue,
        code=tuple(lists["code"]),
        warnings=tuple(lists["warnings"]),
        notes=tuple(lists["notes"]),
    )


def all_text(values: list[Any]) -> bool:
    return all(isinstance(value, str) for value in values)
