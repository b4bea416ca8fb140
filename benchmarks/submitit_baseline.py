"""The submitit side of bench_preempt_turnaround.py: the example job's training as a `Checkpointable`.

Submitit's recommended setup: one Slurm task per process (`tasks_per_node=2` on 2 nodes), its own
distributed environment (`submitit.helpers.TorchDistributedEnvironment`), Gloo on CPU. The per-step work is
the example trainer's (jobs/example/train.py): MiniResNet on the same synthetic data, batch 32 per rank,
2 micro-steps per optimizer step (no_sync on the first), random flips, SGD with momentum, cosine schedule,
DDP with find_unused_parameters=True, deterministic algorithms, one log line per step from rank 0, the same
`--sleep-per-step`. No periodic checkpoints (the ddpctl side runs with --ckpt-every 0 as well).

Preemption the way submitit's documentation shows: Slurm sends USR2 (`--signal=USR2@delay`, and at
preemption with `preempt_send_user_signal`) to every task; on global rank 0 submitit calls `checkpoint()`,
which saves the model/optimizer/progress to a file and returns `super().checkpoint()` (the callable in its
current state); submitit then runs `scontrol requeue` and exits. The requeued job's `__call__` loads the file.

Every rank appends timestamped progress lines to WORKDIR/progress/attempt-<restart>/rank-<rank>.log
(`import`, `torch`, `dist`, `resumed`, `step K/N`, and on rank 0 `checkpoint-start`/`checkpoint-end`).

    python benchmarks/submitit_baseline.py WORKDIR [--steps 40] [--sleep-per-step 0.2] [--partition debug]

prints the job id (the benchmark calls it this way).
"""

from __future__ import annotations

import time

T_IMPORT = time.time()  # before torch: the process's start, near enough (submitit imports this to unpickle)

import argparse  # noqa: E402 - the timestamp above must come first
import contextlib  # noqa: E402
import itertools  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import submitit  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "jobs" / "example"


def attempt() -> int:
    return int(os.environ.get("SLURM_RESTART_COUNT") or 0)


class Progress:
    """Timestamped progress lines for one rank and attempt, flushed at once."""

    def __init__(self, workdir: Path, rank: int) -> None:
        path = workdir / "progress" / f"attempt-{attempt()}" / f"rank-{rank}.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = path.open("a", buffering=1)

    def log(self, what: str, t: float | None = None) -> None:
        self.file.write(f"{what} t={time.time() if t is None else t:.3f}\n")


class Trainer(submitit.helpers.Checkpointable):
    def __init__(
        self,
        workdir: str,
        *,
        steps: int,
        samples: int,
        sleep_per_step: float,
        batch_size: int = 32,
        accum: int = 2,
        lr: float = 0.05,
        seed: int = 0,
    ) -> None:
        self.workdir, self.steps, self.samples, self.sleep_per_step = workdir, steps, samples, sleep_per_step
        self.batch_size, self.accum, self.lr, self.seed = batch_size, accum, lr, seed
        self.ckpt_path: str | None = None  # set by checkpoint(); the requeued copy of self carries it
        self._live: dict[str, Any] | None = None  # model, optimizer, ...: never pickled

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "_live"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._live = None

    def __call__(self) -> str:
        sys.path.insert(0, str(EXAMPLE))
        import torch
        import torch.distributed as dist
        from data import SyntheticImages  # type: ignore[import-not-found]  # jobs/example, put on sys.path above
        from model import MiniResNet  # type: ignore[import-not-found]
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.utils.data import DataLoader, DistributedSampler

        t_torch = time.time()
        env = submitit.helpers.TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
        progress = Progress(Path(self.workdir), env.rank)
        progress.log("import", T_IMPORT)
        progress.log("torch", t_torch)
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
        dist.init_process_group("gloo")
        progress.log("dist")
        torch.use_deterministic_algorithms(True)
        torch.manual_seed(self.seed)
        net = MiniResNet()
        model = DDP(net, find_unused_parameters=True)
        dataset = SyntheticImages(self.samples, seed=self.seed)
        sampler: DistributedSampler[Any] = DistributedSampler(
            dataset, num_replicas=env.world_size, rank=env.rank, seed=self.seed, drop_last=True
        )
        loader = DataLoader(
            dataset,
            self.batch_size,
            sampler=sampler,
            drop_last=True,
            num_workers=0,
            generator=torch.Generator().manual_seed(self.seed),
        )
        steps_per_epoch = len(sampler) // self.batch_size // self.accum
        opt = torch.optim.SGD(net.parameters(), lr=self.lr, momentum=0.9, weight_decay=5e-4)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=max(1, self.steps))
        torch.manual_seed(self.seed + 1000 + env.rank)
        state = {"step": 0, "epoch": 0, "batch": 0}
        if self.ckpt_path and Path(self.ckpt_path).exists():
            saved = torch.load(self.ckpt_path, weights_only=False)
            net.load_state_dict(saved["model"])
            opt.load_state_dict(saved["opt"])
            sched.load_state_dict(saved["sched"])
            state = saved["progress"]
            progress.log(f"resumed step {state['step']}")
        self._live = {"net": net, "opt": opt, "sched": sched, "state": state, "progress": progress}
        self._train(model, loader, sampler, steps_per_epoch)
        progress.log("done")
        dist.destroy_process_group()
        return "done"

    def _train(self, model: Any, loader: Any, sampler: Any, steps_per_epoch: int) -> None:
        import torch
        from torch import nn

        live = self._live
        assert live is not None
        opt, sched, progress, state = live["opt"], live["sched"], live["progress"], live["state"]

        while state["step"] < self.steps:
            sampler.set_epoch(state["epoch"])
            batches = itertools.islice(iter(loader), state["batch"], None)  # resume mid-epoch
            while state["batch"] < steps_per_epoch * self.accum and state["step"] < self.steps:
                losses = []
                for micro in range(self.accum):
                    images, labels = next(batches)
                    flip = torch.rand(images.shape[0]) < 0.5
                    images = torch.where(flip[:, None, None, None], images.flip(3), images)
                    sync = micro == self.accum - 1
                    with contextlib.nullcontext() if sync else model.no_sync():
                        loss = nn.functional.cross_entropy(model(images), labels) / self.accum
                        loss.backward()  # type: ignore[no-untyped-call]
                    losses.append(float(loss.item()) * self.accum)
                opt.step()
                opt.zero_grad(set_to_none=True)
                sched.step()
                # One dict swap, so the signal handler sees either the old or the new progress.
                state = {"step": state["step"] + 1, "epoch": state["epoch"], "batch": state["batch"] + self.accum}
                live["state"] = state
                progress.log(f"step {state['step']}/{self.steps} loss {sum(losses) / len(losses):.4f}")
                if self.sleep_per_step:
                    time.sleep(self.sleep_per_step)
            if state["batch"] >= steps_per_epoch * self.accum:
                state = {"step": state["step"], "epoch": state["epoch"] + 1, "batch": 0}
                live["state"] = state

    def checkpoint(self, *args: Any, **kwargs: Any) -> submitit.helpers.DelayedSubmission:
        """Called by submitit on global rank 0 from its USR2 handler: save, then requeue self as it is now."""
        import torch

        live = self._live
        if live is not None:
            live["progress"].log(f"checkpoint-start step {live['state']['step']}")
            path = Path(self.workdir) / "checkpoint.pt"
            tmp = path.with_suffix(".tmp")
            torch.save(
                {
                    "model": live["net"].state_dict(),
                    "opt": live["opt"].state_dict(),
                    "sched": live["sched"].state_dict(),
                    "progress": live["state"],
                },
                tmp,
            )
            tmp.replace(path)
            self.ckpt_path = str(path)
            live["progress"].log(f"checkpoint-end step {live['state']['step']}")
        return super().checkpoint(*args, **kwargs)


def submit(
    workdir: Path, *, steps: int, samples: int, sleep_per_step: float, partition: str, signal_delay_s: int
) -> str:
    # The job's python must import this module (to unpickle Trainer) and the example's model/data.
    paths = [str(Path(__file__).resolve().parent), str(EXAMPLE)]
    os.environ["PYTHONPATH"] = os.pathsep.join([*paths, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    executor = submitit.AutoExecutor(folder=workdir / "submitit" / "%j", cluster="slurm")
    executor.update_parameters(
        name="submitit-baseline",
        nodes=2,
        tasks_per_node=2,
        cpus_per_task=1,
        # >= 60 min: submitit counts a signal within min(0.8 x limit, limit - 10 min) as a preemption, not a timeout
        timeout_min=60,
        slurm_partition=partition,
        slurm_signal_delay_s=signal_delay_s,
        slurm_setup=["export OMP_NUM_THREADS=1"],
    )
    job = executor.submit(Trainer(str(workdir), steps=steps, samples=samples, sleep_per_step=sleep_per_step))
    return str(job.job_id)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--samples", type=int, default=10240, help="10240 on 4 ranks: 40 steps per epoch")
    parser.add_argument("--sleep-per-step", type=float, default=0.2)
    parser.add_argument("--partition", default="debug")
    parser.add_argument("--signal-delay-s", type=int, default=60, help="ddpctl's example uses lead_s 60")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    print(
        submit(
            args.workdir.resolve(),
            steps=args.steps,
            samples=args.samples,
            sleep_per_step=args.sleep_per_step,
            partition=args.partition,
            signal_delay_s=args.signal_delay_s,
        )
    )


if __name__ == "__main__":
    # Run through the importable module, so the pickled Trainer is `submitit_baseline.Trainer`, not __main__'s.
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import submitit_baseline

    submitit_baseline.main()
