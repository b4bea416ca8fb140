"""Preemption-safe Lightning runs: `Trainer(callbacks=[..., ddpctl.integrations.lightning.StopCallback()])`.

Lightning saves on a stop only through its own SLURM handling (`SLURMEnvironment(auto_requeue=True)`): on
SIGUSR1 it saves `hpc_ckpt_<n>.ckpt` inside the signal handler and runs `scontrol requeue` itself, which
fights ddpctl's requeue (two requeues of one job, a checkpoint written from a handler that may interrupt a
collective). Under torchrun, as ddpctl launches it, Lightning picks `TorchElasticEnvironment` and installs no
requeue handler, so a ddpctl stop (SIGUSR2 and the stop file) is simply not acted on.

With this callback every rank agrees on the same batch end (`ddpctl.runtime.StopAgreement` over the Gloo control
group), the Trainer saves `stop-step=<step>.ckpt` there (`trainer.save_checkpoint`: every rank takes part, rank
0 writes) into `$DDPCTL_CKPT_DIR` (the callback's `dirpath` when given; outside ddpctl the ModelCheckpoint's), and every
rank records the stop and exits 0, so the job requeues and `resume: {preset: lightning}` hands the next attempt
`--ckpt_path` of that file (the newest complete `.ckpt`). A `SLURMEnvironment(auto_requeue=True)` given to the
Trainer is switched to `auto_requeue=False` at setup, before Lightning installs its handlers (said on stderr).

A LightningCLI script takes the callback as `--trainer.callbacks+=ddpctl.integrations.lightning.StopCallback` and
the appended `--ckpt_path` as its `fit` subcommand's own argument, so its `args` are the same on every attempt.
Two LightningCLI defaults would still defeat the resume, and the callback settles both at setup: its
`SaveConfigCallback` refuses to start when `config.yaml` already exists in the log directory, which on a
restart is the first attempt's own file (overwritten from attempt 1 on, said on stderr), and its default
`ModelCheckpoint` writes under the log directory, where the preset does not look (the stop's checkpoint goes to
`$DDPCTL_CKPT_DIR` whatever the ModelCheckpoint's `dirpath`; one outside it is named on stderr).
lightning is imported here only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from lightning.fabric.plugins.environments import SLURMEnvironment
from lightning.pytorch import Callback
from lightning.pytorch.callbacks import ModelCheckpoint

from ddpctl import runtime
from ddpctl.run import envvars
from ddpctl.runtime import stopflag


def stop_checkpoint_dir(trainer: Any, dirpath: str | Path | None = None) -> Path:
    """Where the stop's checkpoint goes: `dirpath`, `$DDPCTL_CKPT_DIR`, the ModelCheckpoint's, the root dir.

    `$DDPCTL_CKPT_DIR` before the ModelCheckpoint's: it is where the next attempt's `--ckpt_path` is looked for,
    and a LightningCLI's default ModelCheckpoint writes under the log directory instead."""
    if dirpath is not None:
        return Path(dirpath)
    if os.environ.get(envvars.CKPT_DIR):
        return Path(os.environ[envvars.CKPT_DIR])
    own = getattr(trainer.checkpoint_callback, "dirpath", None)
    return Path(own or trainer.default_root_dir)


def keep_lightning_from_requeueing(trainer: Any) -> None:
    """Lightning's own SLURM requeue off (it would requeue the job beside ddpctl, from inside a signal handler)."""
    env = getattr(trainer._accelerator_connector, "cluster_environment", None)
    if isinstance(env, SLURMEnvironment) and env.auto_requeue:
        env.auto_requeue = False
        if trainer.is_global_zero:
            print("ddpctl: SLURMEnvironment(auto_requeue=True) switched off: ddpctl requeues", file=sys.stderr)


def let_restart_rewrite_config(trainer: Any) -> None:
    """On a restart, LightningCLI's SaveConfigCallback may overwrite the config.yaml the first attempt wrote.

    Unchanged it raises "expected .../config.yaml to NOT exist" on every attempt after the first whenever the log
    directory is the same on each (`logger: false`, or a logger with a fixed version), so the requeue dies."""
    cli = sys.modules.get("lightning.pytorch.cli")  # imported by a LightningCLI script (it imports jsonargparse)
    if cli is None or int(os.environ.get(envvars.ATTEMPT, "0") or 0) == 0:
        return  # on the first attempt an existing config.yaml is another run's: LightningCLI's refusal stands
    for callback in trainer.callbacks:
        if isinstance(callback, cli.SaveConfigCallback) and not callback.overwrite and not callback.already_saved:
            callback.overwrite = True
            if trainer.is_global_zero:
                print("ddpctl: restart: the first attempt's LightningCLI config.yaml is overwritten", file=sys.stderr)


def name_outside_checkpoints(trainer: Any, ckpt_dir: Path) -> None:
    """One line (rank 0) per ModelCheckpoint writing outside `$DDPCTL_CKPT_DIR`: the next attempt's `--ckpt_path`
    is looked for there only, so an attempt killed before its stop's checkpoint resumes from none of those."""
    for callback in trainer.checkpoint_callbacks:
        own = getattr(callback, "dirpath", None) if isinstance(callback, ModelCheckpoint) else None
        if own and trainer.is_global_zero and Path(own).resolve() != ckpt_dir.resolve():
            where = f"{own}, outside $DDPCTL_CKPT_DIR ({ckpt_dir})"
            print(f"ddpctl: ModelCheckpoint writes to {where}: no restart resumes from those", file=sys.stderr)


class StopCallback(Callback):  # type: ignore[misc]  # lightning's Callback is untyped here (follow_imports=skip)
    """Save `stop-step=<step>.ckpt` at the batch end every rank agrees to stop at, then exit 0 for the requeue."""

    def __init__(self, dirpath: str | Path | None = None, min_interval_s: float = 0.1) -> None:
        self._dirpath = dirpath
        self._min_interval_s = min_interval_s
        self._ctx: runtime.DistContext | None = None
        self._agreement: runtime.StopAgreement | None = None

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        # Runs before Lightning registers its signal handlers (Trainer._run), and before a LightningCLI's
        # SaveConfigCallback (appended after the callbacks given on its command line) checks for config.yaml.
        keep_lightning_from_requeueing(trainer)
        let_restart_rewrite_config(trainer)

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        # The strategy has made its process group by now; init() adopts it and adds the Gloo control group
        # (collective: every rank reaches on_train_start).
        self._ctx = runtime.init()
        self._agreement = runtime.StopAgreement(self._ctx, self._min_interval_s)
        stopflag.announce_listener("ddpctl.integrations.lightning.StopCallback")
        if os.environ.get(envvars.CKPT_DIR):  # each ModelCheckpoint has resolved its dirpath at its own setup
            name_outside_checkpoints(trainer, Path(os.environ[envvars.CKPT_DIR]))

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self._agreement is None or self._ctx is None or not self._agreement.should_stop():
            return  # should_stop() is True on the same call on every rank
        self._agreement.close()
        step = int(trainer.global_step)
        path = stop_checkpoint_dir(trainer, self._dirpath) / f"stop-step={step}.ckpt"
        trainer.save_checkpoint(path)  # collective; its barrier makes no rank go on before rank 0 wrote it
        runtime.finish_for_requeue(self._ctx, step, path)  # exits 0 on every rank

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        if self._agreement is not None:
            self._agreement.close()
