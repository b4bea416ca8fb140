"""Drop one known C++ warning from this process's stderr, around the code that emits it.

torch's DDP reducer prints its find_unused_parameters advice (about 400 characters, once per rank) straight to
fd 2 from C++, so Python's `warnings` filters cannot catch it. Around the first optimizer step, where it is
printed, stderr goes to a temporary file; afterwards everything else is written back in order.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def without_stderr_lines(fragment: str) -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as held:
        os.dup2(held.fileno(), 2)
        try:
            yield
        finally:  # also on an exception: its traceback is printed later, to the real stderr
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            held.seek(0)
            for line in held.read().decode(errors="replace").splitlines(keepends=True):
                if fragment not in line:
                    sys.stderr.write(line)
            sys.stderr.flush()
