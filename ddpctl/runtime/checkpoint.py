"""Checkpointer: atomic, keep-N, "latest complete" checkpoints with a per-rank part.

    <dir>/step-000000120/
        shared.pt      rank 0: everything identical across DDP replicas (model, optimizer, scheduler, ...)
        rank-<r>.pt    every rank: its own small part (RNG states, sampler position)
        rank-<r>.json  every rank, after its files: their sizes and CRC-32
        OWNER          first: which run writes this step (see ckptowner: retention never touches others')
        COMPLETE       rank 0, last, after all rank-<r>.json exist: the merged file table

Only a directory with COMPLETE whose files match the table is ever loaded (hydra#1822, torchtitan's
.metadata check). Older checkpoints are deleted only after a newer one is complete.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from ddpctl.run import envvars, history
from ddpctl.run.history import CheckpointSkipped, Resumed
from ddpctl.run.layout import RunLayout
from ddpctl.runtime import ckptio, ckptowner, progress
from ddpctl.runtime.ckptdir import MARKER, SHARED, default_dir, rank_part, rank_table, step_dirname, step_dirs
from ddpctl.runtime.dist import DistContext, all_reduce_min, cpu_group
from ddpctl.runtime.snapshot import SnapshotPool

RANK_KEY = "rank"  # the key of a state dict whose value is this rank's own part
COMMIT_TIMEOUT_S = 600.0


class Checkpointer:
    """Save and find checkpoints. Construct it on every rank at the same point (it may create a Gloo group).

    `dir` defaults to `$DDPCTL_CKPT_DIR` (else `$DDPCTL_RUN_DIR/checkpoints`, else ./checkpoints); `keep` to
    `$DDPCTL_CKPT_KEEP` (else 3; 0 keeps all). The directory must be shared by all nodes.
    """

    def __init__(
        self,
        dir: str | Path | None = None,  # the documented public name; shadows a builtin only here
        keep: int | None = None,
        ctx: DistContext | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if env is None else env
        self.dir = Path(dir) if dir is not None else default_dir(env)
        self.keep = int(env.get(envvars.CKPT_KEEP, "3")) if keep is None else keep
        self.ctx = ctx if ctx is not None else _ctx_from_env(env)
        self._events = Path(env[envvars.RUN_DIR]) if env.get(envvars.RUN_DIR) else None
        self._group = cpu_group(self.ctx.distributed)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._pool = SnapshotPool()
        self._owner = self._agree_owner(env)
        self._adopted: set[int] = set()  # the checkpoint this run resumed from: its timeline continues here
        # Step directories past the checkpoint load_latest resumed from, as they were before any rank could save
        # again: an abandoned timeline, the only steps past the newest that a prune may remove. A step directory
        # made later is a faster rank's next save, which rank 0's background commit must never take away.
        self._abandoned: set[int] = set()

    def _agree_owner(self, env: Mapping[str, str]) -> str:
        box: list[Any] = [ckptowner.run_identity(env) or ckptowner.fresh_identity()]
        if self.ctx.distributed and ckptowner.run_identity(env) is None:
            dist.broadcast_object_list(box, src=0, group=self._group)
        return str(box[0])

    def save(self, step: int, state: dict[str, Any], blocking: bool = True) -> Path:
        """Write checkpoint `step` on every rank; return its directory.

        `state[RANK_KEY]` ("rank") is this rank's own part; everything else is taken from rank 0 only.
        With `blocking=False` the state is snapshotted (copied to CPU) and written on a background thread;
        call `wait()` before relying on it (the next `save`, `load_latest` and `wait` do). A blocking save
        returns once its checkpoint is complete; removing older ones beyond `keep` runs on, joined the same way.
        """
        progress.mark("checkpoint")  # the hang watchdog allows health.checkpoint_s for a save
        self.wait()
        path = self.dir / step_dirname(step)
        path.mkdir(parents=True, exist_ok=True)
        ckptowner.claim(path, self._owner)
        if blocking:
            self._write_parts(path, state)
            self.ctx.barrier()
            if self.ctx.is_main:
                self._commit(path, step)
                # Retention deletes older steps, each as large as this one (1.45 s of a 1 GiB save under load):
                # the new step is complete, so that runs beside training, joined by the next wait().
                self._start(self._prune, step)
            return path
        frozen = self._pool.snapshot(state)  # safe to reuse buffers: wait() above finished the last write
        self._start(self._background, path, step, frozen)
        return path

    def _start(self, work: Callable[..., None], *args: Any) -> None:
        """Run `work` on the one background thread; its error is re-raised by wait() on the training thread."""

        def run() -> None:
            try:
                work(*args)
            except BaseException as exc:
                self._error = exc

        # Not a daemon: a script that exits (finish_for_requeue raises SystemExit) still finishes it first.
        self._thread = threading.Thread(target=run, daemon=False)
        self._thread.start()

    def wait(self) -> None:
        """Block until a background save finished; re-raise its error here, on the training thread."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise RuntimeError("background checkpoint save failed") from error

    def _background(self, path: Path, step: int, state: dict[str, Any]) -> None:
        self._write_parts(path, state)
        if self.ctx.is_main:
            self._commit(path, step)
            self._prune(step)

    def _write_parts(self, path: Path, state: dict[str, Any]) -> None:
        try:
            self._write_own_parts(path, state)
        except BaseException:
            # A failed save (disk full, ...) takes its partial files with it; the previous complete checkpoint
            # is untouched and stays the one load_latest finds.
            rank = self.ctx.rank
            own = (rank_part(rank), rank_table(rank), *((SHARED, ckptowner.OWNER) if self.ctx.is_main else ()))
            ckptio.remove_files(path, own, remove_dir=self.ctx.is_main)
            raise

    def _write_own_parts(self, path: Path, state: dict[str, Any]) -> None:
        rank = self.ctx.rank
        files: dict[str, Any] = {}
        if self.ctx.is_main:
            shared = {k: v for k, v in state.items() if k != RANK_KEY}
            files[SHARED] = ckptio.atomic_torch_save(shared, path / SHARED)
        name = rank_part(rank)
        files[name] = ckptio.atomic_torch_save(state.get(RANK_KEY, {}), path / name)
        ckptio.atomic_write_json({"rank": rank, "files": files}, path / rank_table(rank))

    def _commit(self, path: Path, step: int) -> None:
        """Rank 0: once every rank's table is there, write the marker (the caller prunes older checkpoints)."""
        files: dict[str, Any] = {}
        deadline = time.monotonic() + COMMIT_TIMEOUT_S
        for rank in range(self.ctx.world_size):
            # After the barrier these exist already; for a background save this waits for slower ranks.
            while (table := ckptio.read_table(path / rank_table(rank))) is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"rank {rank} never finished its part of {path} "
                        "(is the checkpoint directory on a filesystem all nodes share?)"
                    )
                time.sleep(0.05)
            files.update(table["files"])
        marker = {
            "step": step,
            "world_size": self.ctx.world_size,
            "files": files,
            "time": time.time(),
            "owner": self._owner,
        }
        ckptio.atomic_write_json(marker, path / MARKER)

    def _prune(self, newest: int) -> None:
        complete: list[int] = []
        for step, path in sorted(step_dirs(self.dir).items(), reverse=True):
            # Steps past the one just saved belong to a timeline abandoned by resuming from an older
            # checkpoint (the newer one was damaged); incomplete ones are leftovers of a crash.
            # Only ours (or the one we resumed from) may go: the directory may hold another run's work.
            if step != newest and not ckptowner.may_delete(path, self._owner, self._adopted, step):
                continue
            if step > newest and step not in self._abandoned:
                continue  # a faster rank's next save (or one this run has not reached): not ours to judge yet
            if step > newest or (step != newest and not (path / MARKER).exists()):
                shutil.rmtree(path, ignore_errors=True)
                self._abandoned.discard(step)  # gone: a later directory of that step is this timeline's own
            elif (path / MARKER).exists():
                complete.append(step)
        for step in complete[self.keep :] if self.keep > 0 else []:
            shutil.rmtree(self.dir / step_dirname(step), ignore_errors=True)

    def latest_step(self) -> int | None:
        """Newest step whose directory has a marker (not verified: see `load_latest`)."""
        steps = [s for s, p in step_dirs(self.dir).items() if (p / MARKER).exists()]
        return max(steps, default=None)

    def load_latest(self) -> tuple[int, dict[str, Any]] | None:
        """(step, state) of the newest complete, undamaged checkpoint, the same one on every rank; or None.

        `state` has the saved shared entries plus this rank's own part under "rank". A damaged candidate
        (missing marker, truncated or altered file, unloadable data) is skipped with a warning on rank 0 and a
        `checkpoint_skipped` event, in favour of the previous one.
        """
        self.wait()
        existing = set(step_dirs(self.dir)) if self.ctx.is_main else set()  # before the agreement lets ranks go on
        candidates = self._agreed_candidates()
        for step in candidates:
            path = self.dir / step_dirname(step)
            state, problem = self._try_load(path)
            ok = all_reduce_min(0.0 if problem else 1.0, self.ctx.distributed, self._group) > 0
            if ok and state is not None:
                self._record_resume(step)
                self._adopted.add(step)
                self._abandoned = {s for s in existing if s > step}
                return step, state
            self._warn_skip(step, problem or "another rank could not load its part")
        self._record_resume(None)
        self._abandoned = existing
        return None

    def _record_resume(self, step: int | None) -> None:
        # `status` tells "resumed from step N" from "restarted from scratch" by this event.
        if self.ctx.is_main and self._events is not None:
            history.append(
                RunLayout(self._events).events,
                Resumed(
                    attempt=self.ctx.attempt,
                    step=step,
                    checkpoint=str(self.dir / step_dirname(step)) if step is not None else None,
                ),
            )

    def _agreed_candidates(self) -> list[int]:
        """Rank 0 lists marked checkpoints, newest first, and broadcasts them: every rank tries the same."""
        box: list[Any] = [self._candidates() if self.ctx.is_main else None]
        if self.ctx.distributed:
            dist.broadcast_object_list(box, src=0, group=self._group)
        steps, foreign = box[0] or ([], [])
        if foreign:  # raised on every rank alike, before any save could collide with the other run's steps
            raise ckptowner.SharedCheckpointDir(ckptowner.refusal(self.dir, foreign))
        return list(steps)

    def _candidates(self) -> tuple[list[int], list[str]]:
        steps: list[int] = []
        foreign: list[str] = []
        for step, path in sorted(step_dirs(self.dir).items(), reverse=True):
            marker = ckptio.read_table(path / MARKER)
            if why := ckptowner.foreign_unresumable(marker, self._owner, self.ctx.world_size):
                foreign.append(f"{path.name}: {why}")
            elif not isinstance(marker, dict):
                self._warn_skip(step, "no completion marker (the save never finished)")
            elif marker.get("world_size") != self.ctx.world_size:
                saved_by = marker.get("world_size")
                self._warn_skip(step, f"saved by {saved_by} ranks, running {self.ctx.world_size}")
            else:
                steps.append(step)
        return steps, foreign

    def _try_load(self, path: Path) -> tuple[dict[str, Any] | None, str | None]:
        marker = ckptio.read_table(path / MARKER)
        files = marker.get("files", {}) if isinstance(marker, dict) else {}
        own = rank_part(self.ctx.rank)
        for name in (SHARED, own):
            problem = ckptio.file_matches(path / name, files.get(name, {}), check_hash=True)
            if problem:
                return None, problem
        try:
            state = torch.load(path / SHARED, map_location="cpu", weights_only=True)
            state[RANK_KEY] = torch.load(path / own, map_location="cpu", weights_only=True)
        except Exception as exc:  # any unpickling failure means "damaged, try the previous one"
            return None, f"cannot be loaded: {exc}"
        return state, None

    def _warn_skip(self, step: int, reason: str) -> None:
        if not self.ctx.is_main:
            return
        path = self.dir / step_dirname(step)
        print(f"ddpctl.runtime: WARNING: skipping checkpoint {path}: {reason}", file=sys.stderr, flush=True)
        if self._events is not None:
            skipped = CheckpointSkipped(step=step, checkpoint=str(path), reason=reason)
            history.append(RunLayout(self._events).events, skipped)


def _ctx_from_env(env: Mapping[str, str]) -> DistContext:
    from ddpctl.runtime.dist import init

    return init(env=env)
