"""The Jinja environment shared by the HTML reports: package templates, autoescape on."""

from __future__ import annotations

import contextlib
import re
from functools import cache
from typing import Any

import jinja2
from markupsafe import Markup, escape

# The package this module is installed in (``conformance.reports``), never a top-level
# ``reports``: a wheel installs no such name, and a checkout on sys.path would hide that.
_PACKAGE = __package__ or ""

_TICKS = re.compile(r"`([^`\n]+)`")


def code_spans(text: object) -> Markup:
    """``text`` escaped, then its `backticked` parts set as code (statements use them).

    Escaping comes first, so the only markup in the result is the ``<code>`` we add.
    """
    return Markup(_TICKS.sub(r"<code>\1</code>", str(escape(text))))


class _BytecodeCache(jinja2.FileSystemBytecodeCache):
    """Compiled templates kept between runs (jinja2's per-user temp directory, checked by
    jinja2 to be private): compiling the three templates costs ~50 ms per run. A cache
    that cannot be written is skipped, never an error."""

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        with contextlib.suppress(OSError):
            super().dump_bytecode(bucket)


def _bytecode_cache() -> jinja2.BytecodeCache | None:
    try:
        return _BytecodeCache()
    except (OSError, RuntimeError):  # no private temp directory: compile every run
        return None


@cache
def environment() -> jinja2.Environment:
    """Templates from ``reports/templates``; every value is HTML-escaped unless marked safe.

    Autoescape is on for every template, whatever its name: the data is target-supplied
    (bodies, headers, error strings) and must never become markup. Undefined names raise,
    so a template typo fails the tests instead of silently rendering an empty cell.
    """
    env = jinja2.Environment(
        loader=jinja2.PackageLoader(_PACKAGE, "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        bytecode_cache=_bytecode_cache(),
    )
    env.filters["code_spans"] = code_spans
    return env


def render(template: str, **context: Any) -> str:
    """Render ``template`` from ``reports/templates`` with ``context``."""
    return environment().get_template(template).render(**context)
