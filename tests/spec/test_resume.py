"""`resume:` (issue 42): which checkpoint is the latest (pure tables), the resume arguments, `$VAR` in args."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from ddpctl.errors import SpecError
from ddpctl.node.torchrun import ddpctl_env, script_args
from ddpctl.run.layout import RunLayout
from ddpctl.run.resumepoint import resume_point
from ddpctl.slurm.env import DistEnv
from ddpctl.spec import load_spec, spec_from_mapping
from ddpctl.spec.resume import (
    Entry,
    Latest,
    env_refs,
    expand_env,
    file_complete,
    latest,
    resume_args,
    scratch_evidence,
)
from ddpctl.spec.resumecheck import JOB_VARIABLES

HF, LIGHTNING = "checkpoint-{step}/", "*.ckpt"


@pytest.mark.parametrize(
    ("entries", "pattern", "by_step", "expected"),
    [
        # HF: the highest step among complete directories; a newer one without trainer_state.json is half-written.
        (
            [Entry("checkpoint-100", True, 10.0, True), Entry("checkpoint-200", True, 20.0, False)],
            HF, True, Latest("checkpoint-100", 100, 10.0),
        ),
        (
            [Entry("checkpoint-900", True, 5.0, True), Entry("checkpoint-1000", True, 4.0, True)],
            HF, True, Latest("checkpoint-1000", 1000, 4.0),  # by step, not by name order or clock
        ),
        ([Entry("checkpoint-100", False, 9.0, True), Entry("runs", True, 9.0, True)], HF, True, None),
        ([Entry("checkpoint-x", True, 9.0, True)], HF, True, None),
        # Lightning: the newest complete .ckpt; last.ckpt carries no step, epoch=..-step=N.ckpt does.
        (
            [Entry("epoch=0-step=50.ckpt", False, 5.0, True), Entry("last.ckpt", False, 6.0, True)],
            LIGHTNING, False, Latest("last.ckpt", None, 6.0),
        ),
        (
            [Entry("epoch=1-step=100.ckpt", False, 7.0, False), Entry("epoch=0-step=50.ckpt", False, 5.0, True)],
            LIGHTNING, False, Latest("epoch=0-step=50.ckpt", 50, 5.0),
        ),
        ([Entry("notes.txt", False, 9.0, True)], LIGHTNING, False, None),
        ([Entry("ckpt.pt", False, 3.0, True)], "ckpt.pt", False, Latest("ckpt.pt", None, 3.0)),
        ([Entry("ckpt.pt", False, 3.0, False)], "ckpt.pt", False, None),
        ([Entry("xckpt.pt", False, 3.0, True)], "ckpt.pt", False, None),
        ([Entry("step-7.pt", False, 1.0, True), Entry("step-12.pt", False, 1.0, True)], "step-{step}.pt", False,
         Latest("step-12.pt", 12, 1.0)),  # same mtime: the step breaks the tie
        ([], "snapshot.pt", False, None),
    ],
)  # fmt: skip
def test_latest_complete_checkpoint(entries: list[Entry], pattern: str, by_step: bool, expected: Latest) -> None:
    assert latest(entries, pattern, by_step=by_step) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--resume_from_checkpoint", "{latest}"), ("--resume_from_checkpoint", "/c/checkpoint-5")),
        (("--ckpt_path={latest}", "--dir={ckpt_dir}"), ("--ckpt_path=/c/checkpoint-5", "--dir=/c")),
        (("--init_from=resume",), ("--init_from=resume",)),
    ],
)
def test_resume_args_substitute_latest_and_ckpt_dir(args: tuple[str, ...], expected: tuple[str, ...]) -> None:
    assert resume_args(args, "/c/checkpoint-5", "/c") == expected


@pytest.mark.parametrize(
    ("arg", "refs", "expanded"),
    [
        ("$DDPCTL_CKPT_DIR/snapshot.pt", ["DDPCTL_CKPT_DIR"], "/ck/snapshot.pt"),
        ("--out=${DDPCTL_CKPT_DIR}x", ["DDPCTL_CKPT_DIR"], "--out=/ckx"),
        ("cost$$5", [], "cost$5"),
        ("--x=$(rm -rf /)", [], "--x=$(rm -rf /)"),
        ("plain", [], "plain"),
        ("$A$B", ["A", "B"], "1$B"),  # B unset in this table's env: kept (submit refused it already)
    ],
)
def test_env_references(arg: str, refs: list[str], expanded: str) -> None:
    assert env_refs(arg) == refs
    assert expand_env(arg, {"DDPCTL_CKPT_DIR": "/ck", "A": "1"}) == expanded


def _zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("archive/data.pkl", b"x" * 1000)
    return buffer.getvalue()


def test_a_cut_torch_save_archive_is_not_complete() -> None:
    whole = _zip_bytes()
    assert file_complete(len(whole), whole[:4], whole[-70000:])
    cut = whole[: len(whole) - 30]
    assert not file_complete(len(cut), cut[:4], cut[-70000:])
    assert not file_complete(0, b"", b"")
    assert file_complete(5, b"\x80\x02}q", b"\x80\x02}q.")  # a legacy pickle: cannot be told, counts


def test_a_real_torch_save_is_complete_and_its_cut_copy_is_not(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    torch.save({"w": torch.zeros(1000)}, tmp_path / "ckpt.pt")
    whole = (tmp_path / "ckpt.pt").read_bytes()
    assert file_complete(len(whole), whole[:4], whole[-70000:])
    half = whole[: len(whole) // 2]
    assert not file_complete(len(half), half[:4], half[-70000:])


def _spec(tmp_path: Path, **extra: object) -> object:
    (tmp_path / "t.py").write_text("")
    data = {"name": "r", "script": str(tmp_path / "t.py"), **extra}
    return spec_from_mapping(data, "x.yaml")


def test_scan_skips_a_half_written_hf_checkpoint_and_links(tmp_path: Path) -> None:
    ckpt = tmp_path / "ck"
    for step, complete in ((100, True), (200, True), (300, False)):
        (ckpt / f"checkpoint-{step}").mkdir(parents=True)
        if complete:
            (ckpt / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    (ckpt / "checkpoint-999").symlink_to(ckpt / "checkpoint-100")
    spec = _spec(tmp_path, resume={"preset": "hf-trainer"})
    found = resume_point(spec, ckpt)  # type: ignore[arg-type]
    assert found is not None and (found.name, found.step) == ("checkpoint-200", 200)
    assert resume_point(spec, tmp_path / "missing") is None  # type: ignore[arg-type]


def test_scan_skips_a_cut_nanogpt_checkpoint(tmp_path: Path) -> None:
    spec = _spec(tmp_path, resume={"preset": "nanogpt"})
    (tmp_path / "ckpt.pt").write_bytes(_zip_bytes()[:-30])
    assert resume_point(spec, tmp_path) is None  # type: ignore[arg-type]
    (tmp_path / "ckpt.pt").write_bytes(_zip_bytes())
    assert resume_point(spec, tmp_path) is not None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("resume", "found", "expected"),
    [
        ({"preset": "hf-trainer"}, "/ck/checkpoint-5",
         ("--output_dir", "/ck", "--resume_from_checkpoint", "/ck/checkpoint-5")),
        ({"preset": "hf-trainer"}, None, ("--output_dir", "/ck")),  # first start: nothing added
        ({"preset": "lightning"}, "/ck/last.ckpt", ("--output_dir", "/ck", "--ckpt_path", "/ck/last.ckpt")),
        ({"preset": "nanogpt"}, "/ck/ckpt.pt", ("--output_dir", "/ck", "--init_from=resume")),
        ({"preset": "torch-snapshot"}, "/ck/snapshot.pt", ("--output_dir", "/ck")),
        ({"preset": "nanogpt", "args": ["--resume={ckpt_dir}"]}, "/ck/ckpt.pt",
         ("--output_dir", "/ck", "--resume=/ck")),
    ],
)  # fmt: skip
def test_script_args_on_an_attempt(
    tmp_path: Path, resume: dict[str, object], found: str | None, expected: tuple[str, ...]
) -> None:
    spec = _spec(tmp_path, args=["--output_dir", "$DDPCTL_CKPT_DIR"], resume=resume)
    assert script_args(spec, {"DDPCTL_CKPT_DIR": "/ck"}, found) == expected  # type: ignore[arg-type]


@pytest.fixture
def jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("")
    return tmp_path


def spec_error(body: str) -> str:
    Path("x.yaml").write_text("name: r\nscript: train.py\n" + body)
    with pytest.raises(SpecError) as info:
        load_spec("x.yaml")
    assert "\n" not in str(info.value)
    return str(info.value)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("args: ['--snapshot-path', '$SNAP/x.pt']\n",
         "x.yaml:3: args.1: '$SNAP/x.pt' refers to $SNAP, which the job does not set"),
        ("resume: {args: ['--p', '${NOPE}']}\n", "x.yaml:3: resume.args.1: '${NOPE}' refers to $NOPE"),
        ("resume: {preset: hf}\n", "resume.preset: got 'hf', expected one of hf-trainer, lightning, nanogpt"),
        ("resume: {args: ['--from', '{latest}']}\n", "resume.args: {latest} needs to know the script's checkpoints"),
        ("resume: {preset: nanogpt, args: ['{lastest}']}\n", "resume.args.0: got '{lastest}', expected placeholders"),
        ("checkpoint: {pattern: 'a/{step}.pt'}\n", "checkpoint.pattern: got 'a/{step}.pt', expected a checkpoint name"),
        ("checkpoint: {pattern: '{step}-{step}'}\n", "checkpoint.pattern: got '{step}-{step}'"),
    ],
)  # fmt: skip
def test_bad_resume_input_is_one_line(jobs: Path, body: str, expected: str) -> None:
    assert expected in spec_error(body)


@pytest.mark.parametrize(
    "body",
    [
        "args: ['--snapshot-path', '$DDPCTL_CKPT_DIR/snapshot.pt', 'cost$$']\n",
        "env: {SNAP: /s}\nargs: ['${SNAP}/x']\n",
        "checkpoint: {pattern: 'step-{step}.pt'}\nresume: {args: ['--resume', '{latest}']}\n",
        "resume: {preset: lightning}\n",
    ],
)
def test_good_resume_input_loads(jobs: Path, body: str) -> None:
    Path("x.yaml").write_text("name: r\nscript: train.py\n" + body)
    load_spec("x.yaml")


@pytest.mark.parametrize(
    ("entries", "expected"),
    [
        # Started at t=100 with step 300 there: a checkpoint of step <= 300 written since is the proof.
        ([Entry("checkpoint-300", True, 50.0, True), Entry("checkpoint-100", True, 120.0, True)],
         Latest("checkpoint-100", 100, 120.0)),
        ([Entry("checkpoint-300", True, 50.0, True), Entry("checkpoint-325", True, 120.0, True)], None),  # resumed
        ([Entry("checkpoint-200", True, 90.0, True)], None),  # older than the attempt: the previous one's
        ([Entry("checkpoint-100", True, 120.0, False)], None),  # half-written: no proof yet
        ([Entry("checkpoint-100", True, 220.0, True)], None),  # after `until`: the next attempt's
        ([Entry("checkpoint-300", True, 150.0, True), Entry("checkpoint-50", True, 130.0, True)],
         Latest("checkpoint-50", 50, 130.0)),  # the lowest one
    ],
)  # fmt: skip
def test_scratch_evidence(entries: list[Entry], expected: Latest | None) -> None:
    assert scratch_evidence(entries, HF, 300, 100.0, 200.0) == expected


def test_every_variable_an_argument_may_name_is_one_the_ranks_get(tmp_path: Path) -> None:
    dist = DistEnv("n1", 23456, 0, 1, 1, 1, "7.0", 0, "7", "n1", ("n1",))
    names = {name for name, _ in ddpctl_env(_spec(tmp_path), dist, RunLayout(tmp_path / "run"))}  # type: ignore[arg-type]
    assert set(JOB_VARIABLES) - {"HOME", "USER"} <= names
