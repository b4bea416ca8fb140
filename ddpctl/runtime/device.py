"""Which GPU a rank trains on, for MFU (ddpctl.health.mfu): the Heartbeat writes it into the progress record."""

from __future__ import annotations

import sys


def gpu_name() -> str | None:
    """The name of this rank's CUDA device when the script already uses CUDA (torch imported and CUDA set up):
    asking never imports torch or starts CUDA itself. None on CPU or when unknown."""
    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_initialized():
            return None
        return str(torch.cuda.get_device_name(torch.cuda.current_device()))[:100]
    except Exception:  # advisory: a broken driver shows in training, not here
        return None
