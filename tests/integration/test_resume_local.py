"""A nanoGPT-style script brought as it is (issue 42), preempted mid-run on the local backend, 2 nodes x 2 ranks.

The script resumes only with `--init_from=resume`, which must be absent on the first start (it then loads
`ckpt.pt` from `--out_dir` unconditionally), and it never creates its `out_dir`: with `resume: {preset: nanogpt}`
and `--out_dir=$DDPCTL_CKPT_DIR` the first attempt starts from scratch, the second resumes from the newest
complete `ckpt.pt`. The checkpoint is a zip, as torch.save writes it (torch itself is not imported: 4 ranks on a
small machine).

Then a PyTorch DDP tutorial-style script (its snapshot loaded by itself when the file exists): with its snapshot
in `$DDPCTL_CKPT_DIR` it resumes there, and a second job of the same spec no longer "resumes" from the first one's
(the issue's row: a snapshot.pt relative to the working directory was shared by every job of the spec).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clitools import Cli, events, preempt_trainer, write_spec

pytestmark = pytest.mark.torchrun

# nanoGPT's configurator: `--key=value` overrides a global; init_from="resume" loads out_dir/ckpt.pt.
NANOGPT = """
import os, sys, time, zipfile, json
out_dir, init_from, max_iters = "out", "scratch", 60
for arg in sys.argv[1:]:
    key, val = arg[2:].split("=", 1)
    assert key in globals(), f"unknown config key {key}"
    globals()[key] = type(globals()[key])(val)
master = os.environ.get("RANK") == "0"
iter_num = 0
if init_from == "resume":
    with zipfile.ZipFile(os.path.join(out_dir, "ckpt.pt")) as z:
        iter_num = json.loads(z.read("archive/data.pkl"))["iter_num"]
    if master:
        print(f"resumed from step {iter_num}", flush=True)
elif master:
    print(f"from scratch, out_dir={out_dir}", flush=True)
while iter_num < max_iters:
    iter_num += 1
    # The first start slows down past step 12, where the test preempts it: a loaded machine's preempt command
    # and lead time must not let it finish first.
    time.sleep(0.2 if init_from == "resume" or iter_num < 12 else 1.0)
    if master:
        print(f"step {iter_num}", flush=True)
        if iter_num % 5 == 0:
            with zipfile.ZipFile(os.path.join(out_dir, "ckpt.pt"), "w") as z:
                z.writestr("archive/data.pkl", json.dumps({"iter_num": iter_num}))
"""


def rank0_lines(run_dir: Path, attempt: int) -> list[str]:
    log = run_dir / f"attempt-{attempt}" / "rank-0.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith(("step ", "resumed ", "from scratch"))]


def script_argv(found: list[dict[str, object]], attempt: int) -> list[str]:
    launch = next(e for e in found if e["event"] == "launch" and e["attempt"] == attempt)
    argv = [str(a) for a in launch["argv"]]  # type: ignore[attr-defined]
    return argv[argv.index("ddpctl.node.worker") + 2 :]


def test_a_nanogpt_style_script_resumes_from_its_newest_checkpoint_with_the_preset(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    script = tmp_path / "train.py"
    script.write_text(NANOGPT)
    spec = write_spec(
        tmp_path / "nano.yaml",
        name="nano",
        script=str(script),
        args=["--out_dir=$DDPCTL_CKPT_DIR", "--max_iters=50"],
        nodes=2,
        nproc_per_node=2,
        run_dir=str(tmp_path / "runs"),
        backend="local",
        resume={"preset": "nanogpt"},
        requeue={"lead_s": 3, "max_preemptions": 2},
    )
    job_id, run_dir = cli.submit(spec)
    cli.wait_for(lambda: "step 12" in rank0_lines(run_dir, 0), timeout=180, what="step 12")
    cli.run("preempt", job_id)
    status = cli.wait_terminal(job_id, timeout=240)
    found = events(run_dir)
    info = json.dumps(found, indent=1)[-6000:] + "\n" + (run_dir / "slurm.out").read_text()
    assert status["state"] == "COMPLETED" and status["restarts"] == 1, (status, info)
    ckpt_dir = str(run_dir / "checkpoints")
    # $DDPCTL_CKPT_DIR expanded (not passed literally), the directory there before the script's first save.
    first, second = rank0_lines(run_dir, 0), rank0_lines(run_dir, 1)
    assert first[0] == f"from scratch, out_dir={ckpt_dir}", first
    assert script_argv(found, 0) == [f"--out_dir={ckpt_dir}", "--max_iters=50"], info
    assert script_argv(found, 1) == [f"--out_dir={ckpt_dir}", "--max_iters=50", "--init_from=resume"], info
    saved = int(re.sub(r"\D", "", second[0]))
    assert second[0] == f"resumed from step {saved}" and saved % 5 == 0 and saved >= 10, second
    assert f"step {saved}" in first and second[1] == f"step {saved + 1}" and second[-1] == "step 50", (first, second)
    shown = cli.run("status", job_id).stdout
    assert f"attempt 1: resumed from {ckpt_dir}/ckpt.pt, given --init_from=resume" in shown, shown
    assert "ended by script-error" not in shown, shown


# The PyTorch DDP tutorial's shape (ddp-tutorial-series/multinode.py): `--snapshot-path` (its default, snapshot.pt,
# is relative to the working directory), loads the snapshot by itself when the file exists (no resume argument),
# saves {"MODEL_STATE", "EPOCHS_RUN"} from rank 0 every `save_every` epochs with a plain torch.save (here a zip as
# torch.save writes it), and resumes at the saved epoch.
TUTORIAL = """
import os, sys, time, zipfile, json
snapshot_path = sys.argv[sys.argv.index("--snapshot-path") + 1]
total_epochs, save_every, epochs_run = 30, 3, 0
master = os.environ.get("RANK") == "0"
if os.path.exists(snapshot_path):
    with zipfile.ZipFile(snapshot_path) as z:
        epochs_run = json.loads(z.read("archive/data.pkl"))["EPOCHS_RUN"]
    if master:
        print(f"Resuming training from snapshot at Epoch {epochs_run}", flush=True)
elif master:
    print("from scratch", flush=True)
for epoch in range(epochs_run, total_epochs):
    # The first start slows down past epoch 8, where the test preempts it (a loaded machine must not finish it).
    time.sleep(1.0 if os.environ.get("DDPCTL_ATTEMPT") == "0" and epoch >= 8 else 0.2)
    if master:
        print(f"Epoch {epoch}", flush=True)
        if epoch % save_every == 0:
            with zipfile.ZipFile(snapshot_path, "w") as z:
                z.writestr("archive/data.pkl", json.dumps({"EPOCHS_RUN": epoch}))
"""


def epochs(run_dir: Path, attempt: int) -> list[str]:
    log = run_dir / f"attempt-{attempt}" / "rank-0.log"
    lines = log.read_text().splitlines() if log.exists() else []
    return [line for line in lines if line.startswith(("Epoch ", "Resuming ", "from scratch"))]


def test_a_tutorial_style_script_resumes_its_own_snapshot_and_a_second_job_does_not_see_it(tmp_path: Path) -> None:
    ran = preempt_trainer(
        tmp_path,
        "tutorial",
        TUTORIAL,
        ["--snapshot-path", "$DDPCTL_CKPT_DIR/snapshot.pt"],
        "torch-snapshot",
        ready=lambda d: "Epoch 8" in epochs(d, 0),
        timeout=180,
        requeue={"lead_s": 3, "max_preemptions": 2},
    )
    cli, job_id, status, run_dir, found, info = ran.cli, ran.job_id, ran.status, ran.run_dir, ran.events, ran.info
    assert status["state"] == "COMPLETED" and status["restarts"] == 1, (status, info)
    snapshot = run_dir / "checkpoints" / "snapshot.pt"
    first, second = epochs(run_dir, 0), epochs(run_dir, 1)
    assert first[0] == "from scratch" and "Epoch 29" not in first, first
    saved = int(second[0].removeprefix("Resuming training from snapshot at Epoch "))
    assert saved % 3 == 0 and saved >= 6 and f"Epoch {saved}" in first, (first, second)
    assert second[1] == f"Epoch {saved}" and second[-1] == "Epoch 29", second
    # No resume argument: the same command line on both attempts, $DDPCTL_CKPT_DIR expanded in it.
    assert script_argv(found, 0) == script_argv(found, 1) == ["--snapshot-path", str(snapshot)], info
    shown = cli.run("status", job_id).stdout
    assert f"attempt 1: {snapshot} was there; the script loads it by itself" in shown, shown
    # A second job of the same spec has a checkpoint directory of its own: it starts from scratch.
    other_id, other_dir = cli.submit(tmp_path / "tutorial.yaml")
    cli.wait_for(lambda: epochs(other_dir, 0) != [], timeout=120, what="the second job's first line")
    cli.run("cancel", other_id)
    assert epochs(other_dir, 0)[0] == "from scratch", epochs(other_dir, 0)
