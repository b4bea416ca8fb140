"""A cluster's answer is bounded before it is read (issue 43, suspected and reproduced: `list --json` and the
status passthrough captured the whole output, then compared its length): a stand-in ssh whose answer never ends."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ddpctl.errors import RemoteError
from ddpctl.remote.profiles import Cluster
from ddpctl.remote.transport import Transport


def test_a_clusters_endless_answer_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ssh = tmp_path / "bin" / "ssh"
    ssh.parent.mkdir()
    ssh.write_text("#!/bin/sh\nexec yes\n")
    ssh.chmod(0o755)
    monkeypatch.setenv("PATH", f"{ssh.parent}:{os.environ['PATH']}")
    monkeypatch.setenv("DDPCTL_HOME", str(tmp_path / "home"))
    transport = Transport(Cluster(name="far", ssh="far"), limit=1 << 16, timeout=30)
    with pytest.raises(RemoteError, match=r"^cluster 'far': answered more than 65536 bytes$"):
        transport.run(["ddpctl", "list", "--json"])
    with pytest.raises(RemoteError, match=r"^cluster 'far': answered more than 65536 bytes$"):
        transport.run(["ddpctl", "internal", "code-put"], data=b"x" * 10)
