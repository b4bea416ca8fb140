"""A script that keeps its own checkpoints (spec `resume:` or `checkpoint.pattern`), seen from node 0's launcher:
the checkpoint directory exists before the script starts, the newest complete checkpoint is found (and handed to
the script through the resume arguments), and at the end the attempt is checked for having trained from scratch
although a checkpoint was there (`resume-point` and `scratch-restart` events; `status` shows both)."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

from ddpctl.run import history, resumepoint
from ddpctl.run.history import CheckpointRotated, ResumePoint, ScratchRestart
from ddpctl.run.layout import RunLayout
from ddpctl.spec import JobSpec
from ddpctl.spec.resume import Entry, Latest, resume_args


@dataclass(frozen=True)
class OwnCheckpoints:
    spec: JobSpec
    directory: Path
    found: Latest | None
    started: float
    before: tuple[Entry, ...] = ()  # the checkpoints of the script's kind at the start (for its rotation)

    @classmethod
    def at_start(cls, spec: JobSpec, layout: RunLayout) -> OwnCheckpoints:
        directory = layout.checkpoints(spec.checkpoint.dir)
        # The script's first save must not fail for a missing directory (the README hands it $DDPCTL_CKPT_DIR).
        with contextlib.suppress(OSError):
            directory.mkdir(parents=True, exist_ok=True)
        found, before = resumepoint.resume_point(spec, directory), resumepoint.entries(spec, directory)
        return cls(spec, directory, found, time.time(), before)

    @property
    def resume_from(self) -> str | None:
        return str(self.directory / self.found.name) if self.found is not None else None

    def record_start(self, layout: RunLayout, attempt: int) -> None:
        """Node 0: what the attempt could resume from and what it was told (nothing without a known kind)."""
        rule = resumepoint.rule_of(self.spec)
        if rule is None:
            return
        path = self.resume_from
        args = resume_args(rule.args, path, str(self.directory)) if path is not None else ()
        step = self.found.step if self.found is not None else None
        history.append(layout.events, ResumePoint(attempt=attempt, checkpoint=path, step=step, args=args))

    def check_end(self, layout: RunLayout, attempt: int) -> list[str]:
        """Node 0, after torchrun: warning lines when the attempt wrote a checkpoint no newer than its start's,
        and when its rotation deleted an earlier attempt's checkpoint newer than all it wrote."""
        lines = [self._scratch(layout, attempt)]
        rotated = resumepoint.rotation_loss(self.spec, self.directory, self.before, self.started)
        if rotated is not None:
            gone, own = rotated
            event = CheckpointRotated(
                attempt=attempt, deleted=gone.name, deleted_step=gone.step or 0, kept=own.name, kept_step=own.step
            )
            history.append(layout.events, event)
            lines.append(event.text())
        return [line for line in lines if line]

    def _scratch(self, layout: RunLayout, attempt: int) -> str | None:
        if self.found is None or self.found.step is None:
            return None
        wrote = resumepoint.scratch_restart(self.spec, self.directory, self.found.step, self.started, None)
        if wrote is None:
            return None
        event = ScratchRestart(
            attempt=attempt, step=self.found.step, checkpoint=self.resume_from, wrote=wrote.name, wrote_step=wrote.step
        )
        history.append(layout.events, event)
        return event.text()
