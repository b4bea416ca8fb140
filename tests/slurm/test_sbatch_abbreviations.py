"""Slurm fact behind issue 10 #10: sbatch reads an unambiguous prefix of a long option as the option, in
#SBATCH lines too, so ddpctl refuses prefixes of the options it sets itself (ddpctl.spec.schema)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from slurmtools import job_info

from ddpctl.errors import SpecError
from ddpctl.spec import spec_from_mapping

pytestmark = pytest.mark.slurm


def test_sbatch_reads_an_abbreviated_job_name_in_a_batch_script(tmp_path: Path) -> None:
    script = tmp_path / "abbrev.sh"
    script.write_text("#!/bin/bash\n#SBATCH --job-n=ddpctl-abbrev-check\n#SBATCH --hold\ntrue\n")
    done = subprocess.run(["sbatch", "--parsable", str(script)], capture_output=True, text=True, timeout=30, check=True)
    job_id = done.stdout.strip().split(";")[0]
    try:
        assert job_info(job_id)["JobName"] == "ddpctl-abbrev-check"
    finally:
        subprocess.run(["scancel", job_id], timeout=30, check=False)
    with pytest.raises(SpecError, match=r"--job-n is an abbreviation sbatch reads as --job-name"):
        spec_from_mapping({"name": "x", "script": "t.py", "sbatch": {"job-n": "y"}}, check_paths=False)
