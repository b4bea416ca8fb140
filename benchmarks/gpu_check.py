"""The GPU path in one go, for whoever has a GPU at hand: prints a table to paste into benchmarks/README.md.

Installs nothing beyond the project; needs one CUDA GPU and takes a few minutes. Every row runs the real CLI on the
local backend (1 node x 1 GPU, NCCL), in a registry of its own:

  1. the example job twice, uninterrupted: the same final weights hash;
  2. the example job preempted mid-run (`ddpctl preempt`) and resumed: the same hash, the stop acknowledged,
     no script error in `status` (on 0.3 every rank crashed: a CPU tensor all-reduced on NCCL's group);
  3. the same run with `health.preflight: true`: the node's GPU check passed before training;
  4. the per-step cost of the runtime on this GPU: a bf16 MLP loop (DDP over NCCL, a group of one) plain, with
     `Heartbeat(model=ddp)` + `beat.step`, and with `StopAgreement.should_stop()`, side by side (target <= 1.01x);
  5. the checkpoint stall: `Checkpointer.save(blocking=False)` of 1 GiB of CUDA tensors vs the loop.

    python benchmarks/gpu_check.py [--keep DIR]     # exit status 0 when every row passed
    python benchmarks/gpu_check.py --cpu            # the same rows on CPU/Gloo: checks this script, proves no GPU
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SPEC = REPO / "jobs" / "example.yaml"
TRAIN = ["--epochs", "2", "--steps-per-epoch", "12", "--ckpt-every", "4"]


class Cli:
    def __init__(self, home: Path, runs: Path, cpu: bool) -> None:
        self.env = {**os.environ, "DDPCTL_HOME": str(home)}
        self.sets = ["--backend", "local", "--set", f"run_dir={runs}", "--set", "nodes=1"]
        self.sets += ["--set", "nproc_per_node=1", "--set", f"gpus_per_node={0 if cpu else 1}"]

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", "ddpctl", *args], capture_output=True, text=True, env=self.env, check=False
        )
        if check and done.returncode != 0:
            raise SystemExit(f"ddpctl {' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
        return done

    def submit(self, name: str, *train: str, sets: tuple[str, ...] = ()) -> tuple[str, Path]:
        extra = [x for item in sets for x in ("--set", item)]
        args = json.dumps([*TRAIN, *train])
        out = self.run("submit", str(SPEC), *self.sets, "--set", f"name={name}", "--set", f"args={args}", *extra).stdout
        return out.split("job ", 1)[1].split()[0], Path(out.split("run dir:", 1)[1].split()[0])

    def wait(self, job: str, timeout: float = 600) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status: dict[str, Any] = json.loads(self.run("status", job, "--json").stdout)
            if status["state"] not in ("PENDING", "RUNNING", "REQUEUED", "STARTING", "STOPPING"):
                return status
            time.sleep(1.0)
        raise SystemExit(f"job {job} did not end within {timeout:g} s")


def final_hash(run_dir: Path) -> str | None:
    for log in sorted(run_dir.glob("attempt-*/rank-0.log"), reverse=True):
        found = re.findall(r"^final-weights-sha256=(\w+)$", log.read_text(errors="replace"), re.M)
        if found:
            return str(found[-1])
    return None


def events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def row(rows: list[tuple[str, str, bool]], what: str, result: str, ok: bool) -> None:
    rows.append((what, result, ok))
    print(f"{'ok  ' if ok else 'FAIL'} {what}: {result}", flush=True)


def job_rows(cli: Cli, rows: list[tuple[str, str, bool]]) -> None:
    first, first_dir = cli.submit("gpucheck-a")
    one = cli.wait(first)
    second, second_dir = cli.submit("gpucheck-b")
    two = cli.wait(second)
    hashes = final_hash(first_dir), final_hash(second_dir)
    same = one["state"] == two["state"] == "COMPLETED" and hashes[0] is not None and hashes[0] == hashes[1]
    row(rows, "example job twice, uninterrupted", f"{one['state']}/{two['state']}, hash {str(hashes[0])[:12]}", same)

    job, run_dir = cli.submit("gpucheck-p", "--sleep-per-step", "0.5", sets=("health.preflight=true",))
    deadline = time.monotonic() + 300
    while not list(run_dir.glob("attempt-0/progress-0.json")) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)
    cli.run("preempt", job)
    status = cli.wait(job)
    told = cli.run("status", job).stdout
    stops = [e for e in events(run_dir) if e["event"] == "stop"]
    resumed = final_hash(run_dir)
    ok = status["state"] == "COMPLETED" and status["restarts"] == 1 and len(stops) == 1 and resumed == hashes[0]
    ok = ok and "NOT ACKNOWLEDGED" not in told and "script-error" not in told
    at = stops[0]["step"] if stops else None
    row(rows, "preempted and resumed", f"{status['state']} restart {status['restarts']}, stop at step {at}", ok)
    checks = [e for e in events(run_dir) if e["event"] == "preflight"]
    passed = bool(checks) and all(e.get("ok") for e in checks)
    row(rows, "preflight GPU stage", f"{len(checks)} checks, {'all passed' if passed else checks}", passed)


def time_variants(variants: dict[str, Any], beat: Any, stop: Any, x: Any, rounds: int) -> dict[str, list[float]]:
    """Seconds per step of each variant, in alternating blocks of 20 steps (the first block warms up)."""
    import torch

    cuda = x.device.type == "cuda"
    times: dict[str, list[float]] = {name: [] for name in variants}
    for index in range(rounds):
        for name, (model, opt) in variants.items():
            start = time.perf_counter()
            for step in range(20):
                with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=cuda):
                    loss = model(x).float().pow(2).mean()
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
                if name == "beat":
                    beat.step(index * 20 + step, samples=x.shape[0])
                if name == "stop":
                    stop.should_stop()
            if cuda:
                torch.cuda.synchronize()
            if index:
                times[name].append((time.perf_counter() - start) / 20)
    return times


def loop_rows(cpu: bool, rows: list[tuple[str, str, bool]]) -> None:
    """Rows 4 and 5 in this process: a group of one on NCCL (Gloo with --cpu)."""
    import torch
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddpctl import runtime

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "0", "RANK": "0", "WORLD_SIZE": "1"})
    os.environ.update(
        {"LOCAL_RANK": "0", "DDPCTL_RUN_DIR": tempfile.mkdtemp(prefix="gpucheck-"), "DDPCTL_ATTEMPT": "0"}
    )
    ctx = runtime.init("gloo" if cpu else "nccl")
    dev = ctx.device
    width, batch, rounds = (128, 32, 11) if cpu else (1024, 256, 41)  # --cpu only checks the script: a small loop
    if cpu:
        torch.set_num_threads(1)
        torch.set_flush_denormal(True)  # the shrinking activations of a deep GELU stack are denormal floats on a CPU

    def build() -> tuple[nn.Module, torch.optim.Optimizer]:
        torch.manual_seed(0)
        layers = [m for _ in range(6) for m in (nn.Linear(width, width), nn.GELU())]
        model = DDP(nn.Sequential(*layers).to(dev), device_ids=None if cpu else [0])
        return model, torch.optim.AdamW(model.parameters(), lr=1e-4)

    variants = {"plain": build(), "beat": build(), "stop": build(), "plain2": build()}
    beat = runtime.Heartbeat(model=variants["beat"][0])
    stop = runtime.StopAgreement(ctx)
    x = torch.randn(batch, width, device=dev)
    times = time_variants(variants, beat, stop, x, rounds)
    med = {name: statistics.median(t) for name, t in times.items()}
    for name in ("beat", "stop", "plain2"):
        ratio = med[name] / med["plain"]
        label = {"beat": "Heartbeat(model=ddp)", "stop": "StopAgreement", "plain2": "A/A noise floor"}[name]
        row(
            rows,
            f"per-step ratio, {label}",
            f"{ratio:.4f}x ({med['plain'] * 1e3:.2f} ms steps)",
            ratio <= 1.01 or name == "plain2" or cpu,  # on a CPU the ratio is informational
        )
    ckpt = runtime.Checkpointer(dir=Path(os.environ["DDPCTL_RUN_DIR"]) / "ckpt", ctx=ctx)
    count = 2 if cpu else 16  # 16 x 64 MiB: 1 GiB on the GPU
    state = {"model": {f"w{i}": torch.randn(16 << 20, device=dev) for i in range(count)}, runtime.RANK_KEY: {}}
    start = time.perf_counter()
    ckpt.save(1, state, blocking=False)
    stall = time.perf_counter() - start
    ckpt.wait()
    row(rows, f"checkpoint stall, {count * 64} MiB, background save", f"{stall:.3f} s", stall < 1.0)
    stop.close()
    beat.close()
    ctx.close()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu", action="store_true", help="run the rows on CPU/Gloo (checks this script; no GPU claim)")
    p.add_argument("--keep", type=Path, default=None, help="keep the runs here (default: a temporary directory)")
    args = p.parse_args()
    import torch

    if not args.cpu and not torch.cuda.is_available():
        print("no CUDA GPU visible: nothing was run (use --cpu to check the script itself)")
        return 2
    where = args.keep or Path(tempfile.mkdtemp(prefix="ddpctl-gpucheck-"))
    cli = Cli(where / "home", where / "runs", args.cpu)
    rows: list[tuple[str, str, bool]] = []
    device = "CPU (Gloo), --cpu" if args.cpu else f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}"
    nccl = "" if args.cpu else f", CUDA {torch.version.cuda}, NCCL {torch.cuda.nccl.version()}"  # type: ignore[no-untyped-call]
    job_rows(cli, rows)
    loop_rows(args.cpu, rows)
    print(f"\n{device}{nccl}\n\n| check | result | |\n|---|---|---|")
    for what, result, ok in rows:
        print(f"| {what} | {result} | {'ok' if ok else 'FAIL'} |")
    return 0 if all(ok for _, _, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
