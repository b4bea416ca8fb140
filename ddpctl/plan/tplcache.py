"""A per-user cache of compiled templates: a fresh `ddpctl render` or `submit` need not compile the batch template
again (Jinja2's compile of the shipped template is ~10 ms of a ~100 ms command).

Compiled code is marshal data, which is code: whoever can write an entry runs code in the next render. So:
- an entry's name is a hash of everything its code depends on: the template's source, name and file, the
  environment's class and options (sandbox, filters, tests, delimiters), Jinja2's and Python's versions; an
  edited template or another environment never finds a stale entry. The file repeats the key after a magic line
  and is used only if both match;
- the directory ($DDPCTL_TEMPLATE_CACHE, default $XDG_CACHE_HOME/ddpctl/templates) is created 0o700 and used
  only while it is a real directory owned by this user and writable by no one else; an entry is read without
  following a symlink and only if it is a regular file with the same owner and modes (ddpctl.safeio);
- entries are written atomically (a temp file renamed into place), at most MAX_ENTRIES are kept;
- on any doubt (a check fails, a torn or foreign file, an unreadable directory) the template is compiled, as
  without a cache. `DDPCTL_TEMPLATE_CACHE=off` turns the cache off.
Only compiled code is cached, never a rendered script: every render still runs the template in the sandbox.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from types import CodeType

import jinja2
from jinja2.bccache import Bucket

from ddpctl import safeio

CACHE_ENV = "DDPCTL_TEMPLATE_CACHE"
OFF = ("", "0", "off", "no", "false")
MAGIC = b"ddpctl compiled template 1\n"
MAX_ENTRY_BYTES = 4 << 20  # the shipped template's code is ~16 kB
MAX_ENTRIES = 64  # each edit of a user's template adds an entry; the oldest go


def cache_dir(environ: Mapping[str, str]) -> Path | None:
    """Where the cache lives, or None when it is turned off (or no home directory is known)."""
    value = environ.get(CACHE_ENV)
    if value is not None:
        return None if value.strip().lower() in OFF else Path(value)
    base = environ.get("XDG_CACHE_HOME") or (f"{environ['HOME']}/.cache" if environ.get("HOME") else "")
    return Path(base) / "ddpctl" / "templates" if base.startswith("/") else None


def environment_fingerprint(env: jinja2.Environment) -> tuple[object, ...]:
    """What the compiled code of a template depends on besides its source."""
    cls = type(env)
    return (
        f"{cls.__module__}.{cls.__qualname__}",
        env.sandboxed,
        sorted(getattr(env, "intercepted_binops", ())),
        sorted(getattr(env, "intercepted_unops", ())),
        sorted(env.filters),
        sorted(env.tests),
        sorted(env.extensions),
        (env.block_start_string, env.block_end_string, env.variable_start_string, env.variable_end_string),
        (env.comment_start_string, env.comment_end_string, env.line_statement_prefix, env.line_comment_prefix),
        (env.trim_blocks, env.lstrip_blocks, env.keep_trailing_newline, env.newline_sequence),
        (repr(env.autoescape), env.optimized, env.is_async, env.finalize is not None),
        (env.code_generator_class.__qualname__, env.undefined.__qualname__),
    )


def entry_key(env: jinja2.Environment, name: str, filename: str | None, source: str) -> str:
    digest = hashlib.sha256(MAGIC)
    parts = (jinja2.__version__, sys.version, sys.implementation.cache_tag, environment_fingerprint(env), name)
    for part in (*parts, filename, source):
        digest.update(repr(part).encode("utf-8", "surrogatepass") + b"\0")
    return digest.hexdigest()


class TemplateCache(jinja2.BytecodeCache):
    """Jinja2's bytecode-cache hooks, with our key, checks and file format (no pickle: see the module doc)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._usable: bool | None = None

    def usable(self) -> bool:
        if self._usable is None:
            self._usable = safeio.private_dir(self.directory)
        return self._usable

    def get_bucket(self, environment: jinja2.Environment, name: str, filename: str | None, source: str) -> Bucket:
        key = entry_key(environment, name, filename, source)
        bucket = Bucket(environment, key, key)
        if self.usable():
            bucket.code = self._load(key)
        return bucket

    def set_bucket(self, bucket: Bucket) -> None:
        if bucket.code is None or not self.usable():
            return
        data = _header(bucket.key) + marshal.dumps(bucket.code)
        try:
            safeio.write_bytes_atomic(self.directory / f"{bucket.key}.code", data, mode=0o600)
            self._prune()
        except OSError:
            pass  # a full disk or a read-only home: the next render compiles again

    def _load(self, key: str) -> CodeType | None:
        data = safeio.read_private(self.directory / f"{key}.code", MAX_ENTRY_BYTES)
        header = _header(key)
        if data is None or not data.startswith(header):
            return None
        try:
            code = marshal.loads(data[len(header) :])  # noqa: S302 -- a private, content-keyed entry: module doc
        except (EOFError, ValueError, TypeError):
            return None  # torn or not ours
        return code if isinstance(code, CodeType) else None

    def _prune(self) -> None:
        entries = [entry for entry in os.scandir(self.directory) if entry.name.endswith(".code")]
        if len(entries) > MAX_ENTRIES:
            entries.sort(key=lambda entry: entry.stat(follow_symlinks=False).st_mtime)
            for entry in entries[: len(entries) - MAX_ENTRIES]:
                Path(entry.path).unlink(missing_ok=True)


def _header(key: str) -> bytes:
    return MAGIC + key.encode() + b"\n"


def template_cache(environ: Mapping[str, str] | None = None) -> TemplateCache | None:
    directory = cache_dir(os.environ if environ is None else environ)
    return TemplateCache(directory) if directory is not None else None
