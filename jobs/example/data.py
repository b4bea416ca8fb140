"""A synthetic, deterministic image-classification dataset: same bytes on every rank and every run."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset


class SyntheticImages(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """`size` 3x`hw`x`hw` images in `classes` classes: a per-class pattern plus noise (learnable, not trivial)."""

    def __init__(self, size: int = 2048, hw: int = 32, classes: int = 10, seed: int = 0) -> None:
        # Its own generator: building the dataset must not move the global RNG streams that resume restores.
        gen = torch.Generator().manual_seed(seed)
        prototypes = torch.randn(classes, 3, hw, hw, generator=gen)
        self.labels = torch.randint(0, classes, (size,), generator=gen)
        noise = torch.randn(size, 3, hw, hw, generator=gen)
        self.images = 0.5 * prototypes[self.labels] + noise

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.images[index], self.labels[index]
