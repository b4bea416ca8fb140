"""Which Slurm version a test session runs on (tests/slurmtools.py): pure choices over literal inputs."""

from __future__ import annotations

import pytest
from slurmtools import STATE_DIR, client_dir, read_active, target_slurm_version, use_slurm_version

ACTIVE_2411 = f"version=24.11\npath={STATE_DIR}/bin-24.11\n"


@pytest.mark.parametrize(
    ("environ", "active", "expected"),
    [
        ({}, "", "22.05"),  # nothing started yet: the default
        ({}, "version=22.05\npath=\n", "22.05"),
        ({}, ACTIVE_2411, "24.11"),  # `DDPCTL_TEST_SLURM=24.11 start.sh && pytest` stays on 24.11
        ({"DDPCTL_TEST_SLURM": "22.05"}, ACTIVE_2411, "22.05"),  # asked for: start.sh switches back
        ({"DDPCTL_TEST_SLURM": "24.11"}, "", "24.11"),
        ({"DDPCTL_TEST_SLURM": ""}, ACTIVE_2411, "24.11"),  # empty means unset, as in start.sh
    ],
)
def test_target_version(environ: dict[str, str], active: str, expected: str) -> None:
    assert target_slurm_version(environ, active) == expected


def test_read_active_keeps_values_with_equals_signs() -> None:
    assert read_active("version=24.11\npath=/a=b\ngarbage\n") == {"version": "24.11", "path": "/a=b"}


def test_client_dir() -> None:
    assert client_dir("22.05") is None
    assert client_dir("24.11") == STATE_DIR / "bin-24.11"


def test_use_slurm_version_puts_the_clients_first_once() -> None:
    bindir = str(STATE_DIR / "bin-24.11")
    environ = {"DDPCTL_TEST_SLURM": "24.11", "PATH": f"/usr/bin:{bindir}:/bin"}
    assert use_slurm_version(environ) == "24.11"
    assert environ["PATH"] == f"{bindir}:/usr/bin:/bin"
    # Back on 22.05: the 24.11 wrappers (left on PATH by whoever ran the session) are taken off it.
    environ = {"DDPCTL_TEST_SLURM": "22.05", "PATH": f"{bindir}:/usr/bin:/bin"}
    assert use_slurm_version(environ) == "22.05"
    assert environ["PATH"] == "/usr/bin:/bin"
