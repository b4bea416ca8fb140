"""Preemption-safe Hugging Face Trainer runs: `trainer.add_callback(ddpctl.integrations.hf.StopCallback())`.

HF Trainer has no stop handler: a preempted run trains on until it is killed, and its work since the last
periodic save is lost. With this callback a ddpctl stop request (the stop flag that `ddpctl.node.worker` arms on
every rank: the stop file and the stop signal) is agreed on by all ranks at the same step end
(`ddpctl.runtime.StopAgreement`, an all-reduce over the Gloo control group), the Trainer saves
`checkpoint-<step>/` there (`control.should_save`: every rank takes part, as in its periodic saves), and once it is
saved (`on_save`) every rank records the stop and exits 0, so the job requeues and the next attempt resumes with
`resume: {preset: hf-trainer}`. transformers is imported here only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ddpctl import runtime
from ddpctl.runtime import stopflag


class StopCallback(TrainerCallback):  # type: ignore[misc]  # transformers ships no type information
    """Save `checkpoint-<step>/` at the step every rank agrees to stop at, then exit 0 for the requeue."""

    def __init__(self, min_interval_s: float = 0.1) -> None:
        self._min_interval_s = min_interval_s
        self._ctx: runtime.DistContext | None = None
        self._agreement: runtime.StopAgreement | None = None
        self._stopping = False

    def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        # The Trainer has made its process group by now; init() adopts it and adds the Gloo control group
        # (collective: every rank reaches on_train_begin).
        self._ctx = runtime.init()
        self._agreement = runtime.StopAgreement(self._ctx, self._min_interval_s)
        stopflag.announce_listener("ddpctl.integrations.hf.StopCallback")

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> Any:
        if self._agreement is not None and not self._stopping and self._agreement.should_stop():
            self._stopping = True  # the same step on every rank
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_save(self, args: Any, state: Any, control: Any, **_: Any) -> Any:
        # The Trainer calls this on every rank once its checkpoint-<step>/ is written (rank 0 writes
        # trainer_state.json last): finish_for_requeue's barrier makes no rank leave before that.
        if self._stopping and self._ctx is not None and self._agreement is not None:
            self._agreement.close()
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            runtime.finish_for_requeue(self._ctx, state.global_step, path)  # exits 0 on every rank
        return control

    def on_train_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if self._agreement is not None:
            self._agreement.close()
