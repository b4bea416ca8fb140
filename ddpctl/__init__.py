"""ddpctl: run PyTorch DDP training on Slurm and keep it running."""

__version__ = "0.1.0"
