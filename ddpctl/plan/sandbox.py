"""The Jinja environment templates render in: sandboxed, and bounded in time and size.

A spec and its `template:` may come from a shared directory or a colleague, and `render`, `submit --dry-run`
and `doctor` render it on the login node. Jinja2's ImmutableSandboxedEnvironment keeps a template from reaching
Python internals (`__globals__`, `__subclasses__`, `os.system`) or mutating what it is given; on top of it:
- `*` and `**` are checked before they run: `'x' * 10**10` or `9**9**9` is refused, not computed;
- `range()` is the sandbox's bounded one and the rendered script may not exceed MAX_SCRIPT_BYTES;
- rendering stops after RENDER_TIMEOUT_S (in the main thread, where a timer signal can interrupt it).
The batch script's own `setup` lines remain the one documented place where a spec runs shell commands, on
the cluster, when the job runs.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jinja2
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

MAX_SCRIPT_BYTES = 1 << 20  # a batch script is a few kB
MAX_VALUE_LEN = 1 << 20  # the longest string or list `*` may build
MAX_EXPONENT = 256
MAX_INT_BITS = 1 << 16
RENDER_TIMEOUT_S = 10.0


class TemplateSandbox(ImmutableSandboxedEnvironment):
    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context: jinja2.runtime.Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "**" and isinstance(right, (int, float)) and abs(right) > MAX_EXPONENT:
            raise SecurityError(f"exponent {right} is larger than {MAX_EXPONENT}")
        if (
            operator == "**"
            and isinstance(left, int)
            and isinstance(right, int)
            and left.bit_length() * right > MAX_INT_BITS
        ):
            raise SecurityError(f"{left} ** {right} would have more than {MAX_INT_BITS} bits")
        if operator == "*":
            for seq, count in ((left, right), (right, left)):
                if (
                    isinstance(seq, (str, bytes, list, tuple))
                    and isinstance(count, int)
                    and len(seq) * count > MAX_VALUE_LEN
                ):
                    raise SecurityError(f"a value of {len(seq) * count} items is larger than {MAX_VALUE_LEN}")
        return super().call_binop(context, operator, left, right)


def make_sandbox(search_dir: Path) -> TemplateSandbox:
    return TemplateSandbox(
        loader=jinja2.FileSystemLoader(str(search_dir)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # shell text, not HTML; quoting is done by the q filter
    )


class RenderTimeout(SecurityError):
    """Rendering took longer than RENDER_TIMEOUT_S."""


@contextlib.contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread gets signals; the size limits still hold
        return

    def expired(_signum: int, _frame: object) -> None:
        raise RenderTimeout(f"rendering took longer than {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def render_bounded(template: jinja2.Template, context: dict[str, Any]) -> str:
    """Render chunk by chunk, stopping as soon as the output is too large or the time is up."""
    parts: list[str] = []
    size = 0
    with _deadline(RENDER_TIMEOUT_S):
        for chunk in template.generate(**context):
            size += len(chunk)
            if size > MAX_SCRIPT_BYTES:
                raise SecurityError(f"the rendered script is larger than {MAX_SCRIPT_BYTES} bytes")
            parts.append(chunk)
    return "".join(parts)
