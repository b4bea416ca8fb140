"""Detached CPU copies of nested state: a background writer must never see tensors the loop mutates.

The copies go into buffers kept from the previous snapshot when shapes and dtypes match: copying 1 GiB into
memory that is already mapped takes ~50 ms, allocating it afresh ~300 ms or more (page faults). The price is
one resident copy of the state between saves.
"""

from __future__ import annotations

from typing import Any

import torch


class SnapshotPool:
    """Snapshots nested dicts/lists/tuples of tensors, reusing its buffers from one snapshot to the next.

    A snapshot's buffers are overwritten by the next `snapshot()` call: the caller must be done with it.
    """

    def __init__(self) -> None:
        self._buffers: dict[tuple[Any, ...], torch.Tensor] = {}

    def snapshot(self, obj: Any) -> Any:
        copied = self._copy(obj, ())
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the non_blocking device-to-host copies must have landed
        return copied

    def _copy(self, obj: Any, path: tuple[Any, ...]) -> Any:
        if isinstance(obj, torch.Tensor):
            return self._copy_tensor(obj, path)
        if isinstance(obj, dict):
            return {key: self._copy(value, (*path, key)) for key, value in obj.items()}
        if isinstance(obj, list | tuple):
            return type(obj)(self._copy(value, (*path, i)) for i, value in enumerate(obj))
        return obj

    def _copy_tensor(self, tensor: torch.Tensor, path: tuple[Any, ...]) -> torch.Tensor:
        buf = self._buffers.get(path)
        if buf is None or buf.shape != tensor.shape or buf.dtype != tensor.dtype:
            # Pinned host memory lets device-to-host copies run asynchronously and at full bandwidth.
            pin = tensor.device.type == "cuda"
            buf = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=pin)
            self._buffers[path] = buf
        buf.copy_(tensor.detach(), non_blocking=tensor.device.type == "cuda")
        return buf


def snapshot(obj: Any) -> Any:
    """One-off snapshot with fresh buffers."""
    return SnapshotPool().snapshot(obj)
