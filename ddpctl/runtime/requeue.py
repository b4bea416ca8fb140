"""The end of an agreed stop: rank 0 records it for the launcher, every rank leaves with status 0."""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NoReturn

from ddpctl import exitcodes
from ddpctl.run import envvars, history
from ddpctl.run.history import Stopped
from ddpctl.run.layout import RunLayout
from ddpctl.runtime import ckptio, stopflag
from ddpctl.runtime.dist import DistContext, all_reduce_min


def write_stopped_marker(
    ctx: DistContext, step: int, checkpoint: Path | str | None, env: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """Collective. Rank 0 writes attempt-<n>/stopped.json and a `stop` event; returns the record on rank 0.

    The signal time is the earliest any rank noticed the request (the signal may have reached only some).
    """
    env = os.environ if env is None else env
    seen = stopflag.stop_time()
    first = all_reduce_min(seen if seen is not None else math.inf, ctx.distributed)
    if not ctx.is_main:
        return None
    record: dict[str, Any] = {
        "step": step,
        "checkpoint": str(checkpoint) if checkpoint is not None else None,
        "signal_time": None if math.isinf(first) else first,
        "source": stopflag.stop_source() or "another rank",
        "attempt": ctx.attempt,
        "world_size": ctx.world_size,
        "time": time.time(),
    }
    run_dir = env.get(envvars.RUN_DIR)
    if not run_dir:
        print(f"ddpctl.runtime: stopped at step {step} (no {envvars.RUN_DIR}: no marker written)", flush=True)
        return record
    layout = RunLayout(Path(run_dir))
    marker = layout.stopped_marker(ctx.attempt)
    marker.parent.mkdir(parents=True, exist_ok=True)
    ckptio.atomic_write_json(record, marker)
    history.append(layout.events, Stopped.from_marker(record))
    print(f"ddpctl.runtime: stopped at step {step}, checkpoint {checkpoint}; exiting for requeue", flush=True)
    return record


def finish_for_requeue(
    ctx: DistContext, step: int, checkpoint: Path | str | None, env: Mapping[str, str] | None = None
) -> NoReturn:
    """Collective. Record the stop (rank 0), tear down the process group and exit 0 on every rank.

    Status 0 keeps torchrun from treating the stop as a failure and restarting or killing the group; the
    launcher sees stopped.json and exits with the requeue status itself. Call it after the stop checkpoint
    is complete (a blocking `Checkpointer.save`, or `wait()` after a background one).
    """
    write_stopped_marker(ctx, step, checkpoint, env)
    ctx.barrier()  # nobody tears the group down while rank 0 is still inside the collective above
    ctx.close()
    sys.stdout.flush()
    sys.stderr.flush()
    raise SystemExit(exitcodes.OK)
