"""Detached CPU copies of nested state: a background writer must never see tensors the loop mutates."""

from __future__ import annotations

from typing import Any

import torch


def snapshot(obj: Any) -> Any:
    """Copy every tensor in nested dicts/lists/tuples to fresh CPU memory; other leaves are returned as is."""
    if isinstance(obj, torch.Tensor):
        if obj.device.type == "cpu":
            return obj.detach().clone()
        # Pinned staging + non_blocking lets several device-to-host copies overlap; synchronised below.
        out = torch.empty(obj.shape, dtype=obj.dtype, pin_memory=True)
        out.copy_(obj.detach(), non_blocking=True)
        return out
    if isinstance(obj, dict):
        copied = {key: snapshot(value) for key, value in obj.items()}
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        return copied
    if isinstance(obj, list | tuple):
        return type(obj)(snapshot(value) for value in obj)
    return obj
