"""What the workers' torch can do, as the job's own interpreter reports it (pure: the probe's text and its reader).

`doctor` and the dry run must speak of the torch the job runs with (the spec's `python`, else ddpctl's own
interpreter), not of whatever the CLI process could import, and must not import torch themselves (a second or
more on a loaded login node). So the edge (ddpctl.cli.doctor) runs `PROBE` with that interpreter and the job's
environment, beside its other work, and `parse` turns the one JSON line it prints into `TorchFacts`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# Module names the trackers of `tracking:` need in the workers' environment (the package to install, for messages).
TRACKER_MODULES = {"wandb": "wandb", "mlflow": "mlflow", "tensorboard": "tensorboard"}
TRACKER_PACKAGES = {"wandb": "wandb", "mlflow": "mlflow-skinny (or mlflow)", "tensorboard": "tensorboard"}
PROBE_TIMEOUT_S = 60.0  # a cold CUDA torch on a network filesystem takes seconds to import, not a minute
MAX_ANSWER = 4096  # the one line the probe prints; anything longer is not its answer

# `python -c` puts the working directory first on sys.path: a folder named torch (or wandb) there would answer
# instead of the installed one, so the probe drops it. find_spec looks a module up without importing it, and
# torch/version.py, read as text, says the build: a CPU-only torch is never imported (seconds on a loaded host);
# a CUDA or ROCm one is, for its NCCL and the GPUs it sees, which only it can tell.
PROBE = """
import sys
del sys.path[0]
import ast, importlib.util, json, os
out = {"missing": [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]}
found = importlib.util.find_spec("torch")
if found is None or not found.submodule_search_locations:
    out["error"] = "ModuleNotFoundError: No module named 'torch'"
    print(json.dumps(out))
    raise SystemExit(0)
build = {}
try:
    with open(os.path.join(list(found.submodule_search_locations)[0], "version.py")) as handle:
        for node in ast.parse(handle.read(100000)).body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                target = node.targets[0] if isinstance(node, ast.Assign) else node.target
                if isinstance(target, ast.Name) and node.value is not None:
                    build[target.id] = ast.literal_eval(node.value)
except Exception:
    build = {}
if "__version__" in build and not build.get("cuda") and not build.get("hip"):
    out.update(version=str(build["__version__"]), cuda=None, gpus=0, nccl=None)
    print(json.dumps(out))
    raise SystemExit(0)
try:
    import torch
except Exception as err:
    out["error"] = (type(err).__name__ + ": " + str(err))[:300]
else:
    out["version"] = str(torch.__version__)
    out["cuda"] = torch.version.cuda or (torch.version.hip and "HIP " + torch.version.hip)
    try:
        out["gpus"] = int(torch.cuda.device_count())
    except Exception:
        out["gpus"] = 0
    try:
        v = torch.cuda.nccl.version()
        out["nccl"] = ".".join(str(p) for p in v) if isinstance(v, tuple) else str(v)
    except Exception:
        out["nccl"] = None
print(json.dumps(out))
"""


@dataclass(frozen=True)
class TorchFacts:
    """The probe's answer: `version` None when torch did not import there (`error` says why, or why the probe
    gave no answer at all: `answered` False)."""

    python: str
    answered: bool = True
    version: str | None = None
    cuda: str | None = None  # torch.version.cuda; None: a CPU-only build
    nccl: str | None = None  # e.g. 2.28.9; None: no NCCL in this build
    gpus: int = 0  # torch.cuda.device_count() in the job's environment, on this machine
    missing: tuple[str, ...] = ()  # the asked modules (trackers) find_spec did not find
    error: str | None = None

    def summary(self) -> str:
        """`torch 2.11.0+cu130 (CUDA 13.0, NCCL 2.28.9, 1 GPU visible here)` or `... (CPU-only)`."""
        if self.cuda is None:
            return f"torch {self.version} (CPU-only: no CUDA, no NCCL)"
        return f"torch {self.version} (CUDA {self.cuda}, NCCL {self.nccl or 'none'}, {self.gpus} GPU(s) visible here)"


def probe_argv(python: str, trackers: tuple[str, ...]) -> list[str]:
    return [python, "-c", PROBE, *(TRACKER_MODULES[t] for t in trackers)]


def unanswered(python: str, why: str) -> TorchFacts:
    return TorchFacts(python, answered=False, error=why[:300])


def parse(python: str, returncode: int, stdout: str, stderr: str) -> TorchFacts:
    """The probe's answer from its output (its last line, bounded); anything else: an unanswered probe."""
    lines = stdout.strip().splitlines()
    last = lines[-1] if lines else ""
    try:
        out = json.loads(last) if returncode == 0 and len(last) <= MAX_ANSWER else None
    except ValueError:
        out = None
    if not isinstance(out, dict):
        said = (stderr.strip().splitlines() or [f"exit status {returncode}"])[-1]
        return unanswered(python, f"{python} could not run the probe: {said[:200]}")
    modules = {v: k for k, v in TRACKER_MODULES.items()}
    return TorchFacts(
        python,
        version=_text(out.get("version")),
        cuda=_text(out.get("cuda")),
        nccl=_text(out.get("nccl")),
        gpus=out["gpus"] if isinstance(out.get("gpus"), int) else 0,
        missing=tuple(modules.get(str(m), str(m)[:40]) for m in _list(out.get("missing"))),
        error=_text(out.get("error")),
    )


def _list(value: object) -> list[object]:
    return value[:10] if isinstance(value, list) else []


def _text(value: object) -> str | None:
    return str(value)[:300] if value is not None else None
