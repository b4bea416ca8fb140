"""`status --cluster`: the remote ddpctl's answer made safe to show here (ddpctl.remote.passthrough.answer)."""

from __future__ import annotations

import pytest

from ddpctl.errors import RemoteError
from ddpctl.proc import Completed
from ddpctl.remote.passthrough import MAX_ANSWER, Answer, answer
from ddpctl.remote.profiles import Cluster

GPU = Cluster("gpu", "me@login", ("ddpctl",))


def done(returncode: int, stdout: str = "", stderr: str = "") -> Completed:
    return Completed(("ssh",), returncode, stdout, stderr)


@pytest.mark.parametrize(
    ("result", "as_json", "shown"),
    [
        (done(0, "local-1  x  RUNNING\n  backend local\n"), False, Answer("local-1  x  RUNNING\n  backend local")),
        (done(0, "local-1  \x1b]0;pwned\x07x  RUNNING\n"), False, Answer("local-1  ^[]0;pwned^Gx  RUNNING")),
        (done(0, '{"job_id": "1", "name": "\\u001b[2Jx"}\n'), True, Answer('{"job_id": "1", "name": "\\u001b[2Jx"}')),
    ],
)
def test_an_answer_is_shown_safely(result: Completed, as_json: bool, shown: Answer) -> None:
    assert answer(GPU, result, "0.1.0", as_json=as_json) == shown


@pytest.mark.parametrize(
    ("result", "as_json", "message", "code"),
    [
        (
            done(2, stderr="ddpctl: error: job 'nosuch': no such job id or name in the registry /h/registry.jsonl\n"),
            False,
            "cluster 'gpu': job 'nosuch': no such job id or name in the registry /h/registry.jsonl",
            2,
        ),
        (
            done(127, stderr="bash: line 1: ddpctl: command not found\n"),
            False,
            "cluster 'gpu': no 'ddpctl' on me@login: install ddpctl 0.1.0 there (pip install ddpctl==0.1.0)",
            1,
        ),
        (done(1), False, "cluster 'gpu': exit status 1", 1),
        (done(0, "Welcome to login1\n{}"), True, "cluster 'gpu': the remote ddpctl printed no JSON object", 1),
        (done(0, "[1, 2]"), True, "cluster 'gpu': the remote ddpctl printed no JSON object", 1),
        (done(0, "x" * (MAX_ANSWER + 1)), False, f"cluster 'gpu': the remote ddpctl printed more than {MAX_ANSWER}", 1),
    ],
)
def test_a_failed_answer_is_one_line_with_the_remote_exit_status(
    result: Completed, as_json: bool, message: str, code: int
) -> None:
    with pytest.raises(RemoteError) as caught:
        answer(GPU, result, "0.1.0", as_json=as_json)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)
    assert caught.value.exit_code == code
