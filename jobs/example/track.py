"""The example trainer's experiment trackers: whichever the job's `tracking:` turned on, on rank 0 only.

ddpctl gives every attempt of a run the same tracker identity through the environment (WANDB_RUN_ID with
WANDB_RESUME=allow, MLFLOW_RUN_ID with MLFLOW_TRACKING_URI, DDPCTL_TENSORBOARD_DIR), so each library's plain
start call resumes the run an earlier attempt began. That is the one line per tracker below.
"""

from __future__ import annotations

import os
from typing import Any


class Trackers:
    """Open the trackers the environment names; `log` one step's values to each; `close` at the end."""

    def __init__(self, main: bool, start_step: int) -> None:
        self.wandb: Any = None
        self.mlflow: Any = None
        self.board: Any = None
        if not main:
            return
        if os.environ.get("WANDB_RUN_ID"):
            import wandb

            self.wandb = wandb.init(project=os.environ.get("WANDB_PROJECT", "ddpctl-example"))
        if os.environ.get("MLFLOW_RUN_ID"):
            import mlflow

            mlflow.start_run()
            self.mlflow = mlflow
        if os.environ.get("DDPCTL_TENSORBOARD_DIR"):
            from torch.utils.tensorboard import SummaryWriter

            # purge_step: what an interrupted attempt logged past its checkpoint is dropped, not drawn twice.
            self.board = SummaryWriter(os.environ["DDPCTL_TENSORBOARD_DIR"], purge_step=start_step + 1)

    def log(self, step: int, **values: float) -> None:
        if self.wandb is not None:
            self.wandb.log(values, step=step)
        if self.mlflow is not None:
            self.mlflow.log_metrics(values, step=step)
        if self.board is not None:
            for name, value in values.items():
                self.board.add_scalar(name, value, step)

    def close(self) -> None:
        """Flush everything: called before a stop for requeue as well as at the end."""
        if self.board is not None:
            self.board.flush()
        if self.wandb is not None:
            self.wandb.finish()
            self.wandb = None
        if self.mlflow is not None:
            self.mlflow.end_run()  # a next attempt's start_run() sets the same run RUNNING again
            self.mlflow = None
