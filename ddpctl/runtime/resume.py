"""Everything exact resume needs, in weights_only-loadable form: progress, sampler position and every RNG.

`capture()` returns the state dict `Checkpointer.save` expects: shared entries (model, optimizer, scheduler,
scaler, progress) plus this rank's own part under "rank" (RNG states, sampler position). `restore()` puts it
all back and returns the progress, with the sampler already positioned at the next batch of the epoch.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, DistributedSampler

from ddpctl.runtime.checkpoint import RANK_KEY


class ResumableSampler(DistributedSampler[int]):
    """DistributedSampler that can start an epoch after its first `skip_batches` batches.

    The order inside an epoch is the parent's (seed + epoch), so skipping reproduces exactly the batches an
    uninterrupted run would have seen next. `batch_size` must match the DataLoader's.
    """

    def __init__(self, dataset: Dataset[Any], batch_size: int, **kwargs: Any) -> None:
        super().__init__(dataset, **kwargs)
        self.batch_size = batch_size
        self.skip_batches = 0

    def set_epoch(self, epoch: int, skip_batches: int = 0) -> None:
        super().set_epoch(epoch)
        self.skip_batches = skip_batches

    def __iter__(self) -> Iterator[int]:
        indices = list(super().__iter__())
        return iter(indices[self.skip_batches * self.batch_size :])

    def __len__(self) -> int:
        return max(0, self.num_samples - self.skip_batches * self.batch_size)


@dataclass(frozen=True)
class Progress:
    step: int  # optimizer steps completed
    epoch: int  # epoch the next batch belongs to
    batch_in_epoch: int  # batches of that epoch already consumed


def capture_rng() -> dict[str, Any]:
    """Python, NumPy, torch CPU and (when present) CUDA RNG states as tensors, ints and lists."""
    version, words, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    state: dict[str, Any] = {
        "python": {"version": version, "words": torch.tensor(words, dtype=torch.int64), "gauss": gauss},
        "numpy": {
            "kind": str(kind),
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Inverse of `capture_rng`."""
    py = state["python"]
    random.setstate((py["version"], tuple(int(w) for w in py["words"].tolist()), py["gauss"]))
    npy = state["numpy"]
    keys = npy["keys"].numpy().astype(np.uint32)
    np.random.set_state((npy["kind"], keys, npy["pos"], npy["has_gauss"], npy["cached"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    inner = getattr(model, "module", model)  # DDP: save the plain module's keys (no "module." prefix)
    return inner if isinstance(inner, torch.nn.Module) else model


def capture(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    progress: Progress,
    *,
    scheduler: Any = None,
    scaler: Any = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The full training state for `Checkpointer.save`; `extra` must be weights_only-loadable too."""
    batch = progress.batch_in_epoch
    return {
        "model": _unwrap(model).state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "progress": {"step": progress.step, "epoch": progress.epoch, "batch_in_epoch": batch},
        "extra": extra or {},
        # Per rank: the RNG streams differ by rank, and the sampler position is kept next to them so a rank
        # restores exactly the stream it was drawing from.
        RANK_KEY: {"rng": capture_rng(), "sampler": {"epoch": progress.epoch, "skip": batch}},
    }


def restore(
    state: dict[str, Any],
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    sampler: ResumableSampler | None = None,
    *,
    scheduler: Any = None,
    scaler: Any = None,
) -> Progress:
    """Load everything `capture` saved; position `sampler` at the next batch. Returns the progress."""
    _unwrap(model).load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    if scaler is not None and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    restore_rng(state[RANK_KEY]["rng"])
    saved = state["progress"]
    progress = Progress(int(saved["step"]), int(saved["epoch"]), int(saved["batch_in_epoch"]))
    if sampler is not None:
        position = state[RANK_KEY].get("sampler", {"epoch": progress.epoch, "skip": progress.batch_in_epoch})
        sampler.set_epoch(int(position["epoch"]), skip_batches=int(position["skip"]))
    return progress
