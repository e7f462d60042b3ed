"""A document validator's errors, with "no error" decided in one plain pass when certain.

Why: jsonschema's ``iter_errors`` builds a new validator for every subschema it descends
into (``evolve``, a referencing resource each time): about 70 µs for one streamed chunk of
the vendored documents, and the judge validates every chunk of every stream it reads,
twice (STREAM-CHUNK-SCHEMA, and STREAM-CONSISTENT-IDS asking whether the schema owns a
field). Behind the proxy that was three quarters of the judge's CPU (issue 36).

:func:`iter_errors` first walks the instance with a checker compiled once per validator from
its schema (:func:`compile_sure`). That checker only ever answers "valid for certain" or
"not certain": it accepts an instance only where each keyword the validator's own class
applies would yield no error, keyword by keyword, for the two dialects the document module
compiles (``QuickOAS30Validator``, ``QuickOAS31Validator``): the exact Python types of JSON
values (a bool is never a number; a float is never an integer, even 1.0), ``nullable``
as OpenAPI 3.0's ``type`` reads it, a string or null ``enum``/``const`` member compared as
jsonschema's ``equal`` compares them, formats through the validator's own format checker.
Any other keyword jsonschema would apply (``$ref``, ``oneOf``, ``pattern``, ``minimum``,
``patternProperties``, ``prefixItems``, a discriminator...), any other value, any other
validator class, and anything that raises, is "not certain", and then jsonschema's own
``iter_errors`` runs, as it did before: the errors, their order and their messages are
exactly what they were. A certain "valid" is the same answer jsonschema gives (it yields
nothing), only without the descent. tests/test_sure_valid.py compares the two on the
vendored documents' schemas and on drawn schemas and values.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from jsonschema.exceptions import ValidationError

from conformance.judging.document.quick_schema import (
    EXACT,
    QuickOAS30Validator,
    QuickOAS31Validator,
)

Check = Callable[[Any], bool]

#: ``CONFORMANCE_SURE_VALID=off``: jsonschema alone, as before (the benchmarks compare).
SURE_ENV = "CONFORMANCE_SURE_VALID"

#: Keywords whose keyword function never yields an error, per dialect (OpenAPI 3.0's
#: ``not_implemented`` ones; the rest are not keywords of the class and jsonschema skips
#: them: ``nullable``, ``title``, ``default``, ``x-*``... in 3.0, ``nullable`` and more in 3.1).
SILENT_30 = frozenset(
    {"discriminator", "readOnly", "writeOnly", "xml", "externalDocs", "example", "deprecated"}
)
SILENT_31 = frozenset({"description", "discriminator", "xml", "externalDocs", "example"})
#: Keywords this module decides (the rest of the class's keywords make a node uncertain).
DECIDED = frozenset(
    {"type", "format", "properties", "required", "additionalProperties", "items", "anyOf",
     "allOf", "enum", "const"}
)  # fmt: skip


def _never(instance: Any) -> bool:
    return False


def _always(instance: Any) -> bool:
    return True


class _Compiler:
    def __init__(self, validator: Any, is_31: bool) -> None:
        self.is_31 = is_31
        self.keywords = frozenset(type(validator).VALIDATORS)
        self.silent = SILENT_31 if is_31 else SILENT_30
        self.format_checker = validator.format_checker
        self.done: dict[int, Check] = {}
        self.safety: dict[int, bool] = {}
        self.keep: list[Any] = []  # the nodes compiled, so their ids stay theirs

    def compile(self, node: Any) -> Check:
        if node is True:
            return _always
        if not isinstance(node, dict):
            return _never  # False, or not a schema: jsonschema says
        key = id(node)
        if key in self.done:
            return self.done[key]
        cell: list[Check] = [_never]
        # A schema that contains itself (a cycle of dicts) reaches this cell, not a loop.
        self.done[key] = lambda instance: cell[0](instance)
        self.keep.append(node)
        cell[0] = self._node(node)
        self.done[key] = cell[0]
        return cell[0]

    def _node(self, node: dict[str, Any]) -> Check:
        applied = [k for k in node if k in self.keywords and k not in self.silent]
        if any(k not in DECIDED for k in applied):
            return _never
        if "discriminator" in node and ("anyOf" in node or "allOf" in node):
            return _never  # the combinators then dispatch on it
        checks: list[Check] = []
        for k in applied:
            check: Check = getattr(self, "_" + k)(node[k], node)
            if check is _never:
                return _never
            if check is not _always:
                checks.append(check)
        if not checks:
            return _always
        if len(checks) == 1:
            return checks[0]
        every = tuple(checks)
        return lambda instance: all(check(instance) for check in every)

    def safe(self, node: Any) -> bool:
        """Whether jsonschema's evaluation of ``node`` cannot raise, whatever the JSON
        instance: only keywords decided here, well formed, and no format of the checker's
        own (whose functions run arbitrary code)."""
        if isinstance(node, bool):
            return True
        if not isinstance(node, dict):
            return False
        key = id(node)
        if key in self.safety:
            return self.safety[key]
        self.safety[key] = False  # a cycle is not safe
        self.keep.append(node)
        applied = [k for k in node if k in self.keywords and k not in self.silent]
        children: list[Any] = []
        ok = self.compile(node) is not _never and all(k in DECIDED for k in applied)
        ok = ok and "discriminator" not in node
        if ok and "format" in applied and self.format_checker is not None:
            ok = node["format"] not in self.format_checker.checkers
        if ok:
            props = node.get("properties", {})
            children.extend(props.values() if isinstance(props, dict) else [None])
            for k in ("additionalProperties", "items"):
                if k in applied and isinstance(node[k], dict):
                    children.append(node[k])
            for k in ("anyOf", "allOf"):
                if k in applied:
                    children.extend(node[k])
            ok = all(self.safe(child) for child in children)
        self.safety[key] = ok
        return ok

    # -- keywords (each: certain that the class's keyword yields no error) --------------------

    def _type(self, value: Any, node: dict[str, Any]) -> Check:
        if self.is_31:
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or not names:
                return _never
            if not all(isinstance(n, str) and (n in EXACT or n == "null") for n in names):
                return _never  # an unknown type name raises in jsonschema: it says
            exact = tuple(t for n in names if n != "null" for t in EXACT[n])
            null = "null" in names
            return lambda instance: type(instance) in exact or (null and instance is None)
        if not isinstance(value, str) or value not in EXACT:
            return _never  # a list of types, "null" (no such type in 3.0): jsonschema says
        kinds = EXACT[value]
        nullable = node.get("nullable") is True
        return lambda instance: type(instance) in kinds or (nullable and instance is None)

    def _format(self, value: Any, node: dict[str, Any]) -> Check:
        checker = self.format_checker
        if checker is None:
            return _always
        if not isinstance(value, str):
            return _never
        if self.is_31:
            return lambda instance: bool(checker.conforms(instance, value))
        # OpenAPI 3.0's format keyword passes a null instance without asking the checker.
        return lambda instance: instance is None or bool(checker.conforms(instance, value))

    def _properties(self, value: Any, node: dict[str, Any]) -> Check:
        if not isinstance(value, dict):
            return _never
        subs = tuple((name, self.compile(sub)) for name, sub in value.items())

        def properties(instance: Any) -> bool:
            if not isinstance(instance, dict):
                return True  # the keyword only looks at objects (is_type "object")
            return all(name not in instance or check(instance[name]) for name, check in subs)

        return properties

    def _required(self, value: Any, node: dict[str, Any]) -> Check:
        if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
            return _never
        names = tuple(value)
        # Present, each: certain (OpenAPI 3.0 also excuses some missing ones; not decided).
        return lambda instance: not isinstance(instance, dict) or all(n in instance for n in names)

    def _additionalProperties(self, value: Any, node: dict[str, Any]) -> Check:
        if "patternProperties" in node:
            return _never
        declared = node.get("properties", {})
        if not isinstance(declared, dict):
            return _never
        known = frozenset(declared)
        if value is True:
            return _always
        if value is False:
            return lambda instance: not isinstance(instance, dict) or instance.keys() <= known
        if not isinstance(value, dict):
            return _never
        check = self.compile(value)

        def additional(instance: Any) -> bool:
            if not isinstance(instance, dict):
                return True
            return all(check(v) for k, v in instance.items() if k not in known)

        return additional

    def _items(self, value: Any, node: dict[str, Any]) -> Check:
        if "prefixItems" in node or not isinstance(value, dict):
            return _never  # a tuple of schemas (3.0), false or prefixes (3.1): jsonschema says
        check = self.compile(value)
        return lambda instance: not isinstance(instance, list) or all(check(x) for x in instance)

    def _anyOf(self, value: Any, node: dict[str, Any]) -> Check:
        if not isinstance(value, list) or not value:
            return _never
        branches = tuple((self.compile(b), self.safe(b)) for b in value)

        def any_of(instance: Any) -> bool:
            # jsonschema tries the branches in order up to the first valid one: each one
            # before it must be certainly free of exceptions too, or jsonschema says.
            for branch, safe in branches:
                if branch(instance):
                    return True
                if not safe:
                    return False
            return False

        return any_of

    def _allOf(self, value: Any, node: dict[str, Any]) -> Check:
        if not isinstance(value, list):
            return _never
        branches = tuple(self.compile(b) for b in value)
        if any(b is _never for b in branches):
            return _never
        return lambda instance: all(branch(instance) for branch in branches)

    def _enum(self, value: Any, node: dict[str, Any]) -> Check:
        if not isinstance(value, list):
            return _never
        # jsonschema's equal(): a string equals only an equal string; None is None.
        strings = frozenset(v for v in value if type(v) is str)
        null = any(v is None for v in value)
        return lambda instance: (
            (type(instance) is str and instance in strings) or (null and instance is None)
        )

    def _const(self, value: Any, node: dict[str, Any]) -> Check:
        if type(value) is str:
            return lambda instance: type(instance) is str and instance == value
        if value is None:
            return lambda instance: instance is None
        return _never


def _guarded(check: Check) -> Check:
    def sure(instance: Any) -> bool:
        try:
            return check(instance)
        except Exception:  # a format checker that raises: jsonschema says (and raises)
            return False

    return sure


#: id(validator) -> (a weak reference to it, its checker); validators are unhashable.
_compiled: dict[int, tuple[weakref.ref[Any], Check]] = {}


def compile_sure(validator: Any) -> Check:
    """The checker of ``validator``'s schema: True only when ``validator.iter_errors``
    would yield nothing (see the module's docstring); compiled once per validator."""
    key = id(validator)
    entry = _compiled.get(key)
    if entry is not None and entry[0]() is validator:
        return entry[1]
    kind = type(validator)
    found: Check = _never
    off = os.environ.get(SURE_ENV, "").strip().lower() == "off"
    if not off and (kind is QuickOAS31Validator or kind is QuickOAS30Validator):
        compiler = _Compiler(validator, kind is QuickOAS31Validator)
        found = _guarded(compiler.compile(validator.schema))
    # Gone with the validator (before its id can be another's).
    _compiled[key] = (weakref.ref(validator, lambda _: _compiled.pop(key, None)), found)
    return found


def iter_errors(validator: Any, instance: Any) -> Iterable[ValidationError]:
    """``validator.iter_errors(instance)``: nothing, at once, where certainly valid."""
    if compile_sure(validator)(instance):
        return ()
    return validator.iter_errors(instance)  # type: ignore[no-any-return]
