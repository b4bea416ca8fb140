"""What to say about an unknown spec key that difflib finds nothing close to (pure, literal tables).

`nproc` is no misspelling of `nproc_per_node` to difflib, and `lr` is no spec key at all: a training script's
own value. Both are what people write first (issue 45)."""

from __future__ import annotations

# Names from torchrun, Slurm and other launchers for a spec key of ours.
ALIASES = {
    "nproc": "nproc_per_node",
    "nprocs": "nproc_per_node",
    "procs_per_node": "nproc_per_node",
    "ntasks_per_node": "nproc_per_node",
    "gpus": "gpus_per_node",
    "num_gpus": "gpus_per_node",
    "gres": "gpus_per_node",
    "nnodes": "nodes",
    "num_nodes": "nodes",
    "entrypoint": "script",
    "command": "script",
    "time_limit": "time",
    "walltime": "time",
    "environment": "env",
}
# A training script's own settings: they go to the script, not to ddpctl.
SCRIPT_VALUES = frozenset(
    {"lr", "learning_rate", "batch_size", "epochs", "steps", "max_steps", "seed", "momentum", "weight_decay"}
)


def hint(key: str, known: list[str]) -> str | None:
    """`did you mean ...` for a known alias, where to put a script's own value; None: nothing to add."""
    if ALIASES.get(key) in known:
        return f"did you mean '{ALIASES[key]}'?"
    if key.lower() in SCRIPT_VALUES and "args" in known:
        return (
            f"not a ddpctl key: the script's own value goes in args (args: [--{key.replace('_', '-')}, ...]) or "
            f"env (env: {{{key.upper()}: ...}})"
        )
    return None
