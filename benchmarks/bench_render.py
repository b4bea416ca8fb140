"""`ddpctl render` of a 2-node spec vs `torchx run --dryrun -s slurm dist.ddp -j 2x8` (target ratio ≤ 0.40).

Each tool runs from its own clean virtual environment that this script creates (reused when present): TorchX
from PyPI; ddpctl from this checkout (a regular, non-editable install with the two packages `render` imports,
PyYAML and Jinja2 — torch is not needed to render). Equal interpreters matter: a host Python's site hooks
(.pth files, an editable install's import finder) add fixed start-up time that has nothing to do with either
tool. Both commands run as fresh processes through their installed console scripts (`ddpctl`, `torchx`),
alternately, so start-up and imports count for both, as a user experiences them. (Not `python -m ddpctl` from
this checkout: that imports the checkout's sources instead of the install, and compiles them on every run where
no bytecode is written.) ddpctl's compiled-template cache lives in a scratch directory, filled by the warm-up
rounds as a user's first render fills theirs; `--no-template-cache` measures a render that compiles.

    python benchmarks/bench_render.py [--rounds 15] [--venv DIR] [--ours-venv DIR] [--no-template-cache]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import venv
from pathlib import Path

from _timing import alternate, report

ROOT = Path(__file__).resolve().parent.parent


def torchx_venv(path: Path) -> Path:
    exe = path / "bin" / "torchx"
    if not exe.exists():
        print(f"installing torchx into {path} ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(path)
        subprocess.run([str(path / "bin" / "pip"), "install", "-q", "torchx"], check=True)
    return exe


def ddpctl_venv(path: Path) -> Path:
    python = path / "bin" / "python"
    if not python.exists():
        print(f"installing ddpctl into {path} ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(path)
        subprocess.run([str(path / "bin" / "pip"), "install", "-q", "PyYAML", "Jinja2"], check=True)
    # Reinstall each run so the measured code is this checkout's.
    subprocess.run(
        [str(path / "bin" / "pip"), "install", "-q", "--no-deps", "--force-reinstall", str(ROOT)], check=True
    )
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "ddpctl-bench-torchx")
    parser.add_argument("--ours-venv", type=Path, default=Path(tempfile.gettempdir()) / "ddpctl-bench-ours")
    parser.add_argument("--no-template-cache", action="store_true", help="render with the cache turned off")
    args = parser.parse_args()
    torchx = torchx_venv(args.venv)
    python = ddpctl_venv(args.ours_venv)
    with tempfile.TemporaryDirectory() as scratch:
        train = Path(scratch) / "train.py"
        train.write_text("print('hello')\n")
        cache = "off" if args.no_template_cache else str(Path(scratch) / "template-cache")
        # Without PYTHONPATH: a checkout on it would be imported instead of the install being measured.
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        env["DDPCTL_TEMPLATE_CACHE"] = cache
        ours = [str(python.with_name("ddpctl")), "render", str(ROOT / "jobs" / "example.yaml"), "--set", "nodes=2"]
        theirs = [str(torchx), "run", "--dryrun", "-s", "slurm", "dist.ddp", "-j", "2x8", "--script", str(train)]
        alternate(ours, theirs, 2, cwd=str(ROOT), env=env)  # warm the page cache for both (and our cache)
        ours_t, theirs_t = alternate(ours, theirs, args.rounds, cwd=str(ROOT), env=env)
    report("ddpctl render", ours_t, "torchx --dryrun", theirs_t, "<= 0.40")


if __name__ == "__main__":
    main()
