"""One table of options (issue 35): every option declared once, every door's parser made
from it.

``--contract`` had two declarations with two help texts (the plugin's and the one ``judge``
and ``proxy`` shared), and the help page's groups left it out. Now
conformance/front/option_table.py declares each option once, with the doors that take it,
and every parser is generated from it: this test fails when a door's module declares an
option of its own, when a flag is in the table twice, and when a door's parser (or its
``--help``) misses an option the table gives it, puts it in another group or gives it
another default. ``merge``, ``compare`` and ``serve`` keep parsers of their own: they are
not doors of the table yet, so their modules are not scanned.
"""

from __future__ import annotations

import argparse
import ast
import re
from pathlib import Path
from typing import Any

import pytest

from conformance.front import cli, gate, merge, option_table, proxy, traffic_cli
from conformance.front.option_table import (
    BY_FLAG,
    GATE,
    JUDGE,
    MERGE,
    OPTIONS,
    PROXY,
    PYTEST,
    RUN,
    Option,
)

FRONT = Path(option_table.__file__).resolve().parent
#: Where each door's parser is made: none of them may declare an option itself.
DOOR_MODULES = {
    PYTEST: ("options.py", "plugin.py"),
    RUN: ("cli.py",),
    JUDGE: ("traffic_cli.py",),
    PROXY: ("proxy.py",),
    GATE: ("gate.py",),
    MERGE: ("merge.py",),
}
#: What a door's module may still add itself: help switches and positional arguments.
NOT_OPTIONS = {"-h", "--help", "--help-pytest"}
PARSERS = {
    RUN: cli.help_parser,
    JUDGE: traffic_cli.parser,
    PROXY: proxy.parser,
    GATE: gate._parser,
    MERGE: merge.parser,
}


def _declared(path: Path) -> list[str]:
    """The option strings a module passes to ``add_argument``/``addoption`` literally."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr not in ("add_argument", "addoption"):
            continue
        for arg in node.args:
            if isinstance(arg, ast.Constant) and str(arg.value).startswith("-"):
                found.append(str(arg.value))
    return found


def test_every_option_is_declared_once_in_the_table() -> None:
    flags = [option.flag for option in OPTIONS]
    assert len(flags) == len(set(flags)), sorted({f for f in flags if flags.count(f) > 1})
    for option in OPTIONS:
        assert option.group in option_table.GROUPS, option
        assert option.doors and option.doors <= set(option_table.DOORS), option
        assert option.help.strip(), option
        # A run's two doors (pytest, the command line) take the same options.
        assert (PYTEST in option.doors) == (RUN in option.doors), option


@pytest.mark.parametrize("door", sorted(DOOR_MODULES))
def test_no_door_declares_an_option_of_its_own(door: str) -> None:
    for name in DOOR_MODULES[door]:
        own = [flag for flag in _declared(FRONT / name) if flag not in NOT_OPTIONS]
        assert own == [], f"{name} declares {own}: declare them in option_table.OPTIONS"


def test_no_front_module_declares_an_option_of_the_table() -> None:
    """Any command of the front (compare, catalogue, demo, proofs too) that takes an option
    the table has takes it from the table: one declaration, one help text."""
    for path in sorted(FRONT.glob("*.py")):
        again = [flag for flag in _declared(path) if flag in BY_FLAG]
        assert again == [], f"{path.name} declares {again} again: use option_table.add_arguments"


def test_the_scan_sees_a_second_declaration(tmp_path: Path) -> None:
    """The scan above is not blind: a door that declared --contract again is caught."""
    module = tmp_path / "door.py"
    module.write_text('p.add_argument("--contract", choices=["a"])\ngroup.addoption("--x")\n')
    assert _declared(module) == ["--contract", "--x"]


def _groups(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each option string of ``parser`` -> the title of the group that shows it."""
    out = {}
    for group in parser._action_groups:
        for action in group._group_actions:
            for flag in action.option_strings:
                out[flag] = group.title or ""
    return out


def _default(option: Option) -> Any:
    if option.kind is bool:
        return False
    if option.kind is list:
        return list(option.default or ())
    return option.default


@pytest.mark.parametrize("door", sorted(PARSERS))
def test_each_doors_parser_takes_the_options_the_table_gives_it(door: str) -> None:
    parser = PARSERS[door]()
    groups = {flag: title for flag, title in _groups(parser).items() if flag not in NOT_OPTIONS}
    expected = {option.flag: option.group for option in option_table.of(door)}
    assert groups == expected
    if door == RUN:
        return  # the help page checks the line: it fills in no default (pytest does)
    given = [a for o in option_table.of(door) if o.required for a in (o.flag, "x")]
    positional = {JUDGE: ["f.har"], MERGE: ["results.json"]}.get(door, [])
    namespace = parser.parse_known_args([*given, *positional])[0]
    for option in option_table.of(door):
        if not option.required:
            assert getattr(namespace, option.dest) == _default(option), option.flag


def test_the_plugin_takes_the_options_the_table_gives_it(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    group = config._parser.getgroup("conformance")
    flags = [name for opt in group.options for name in opt.names()]
    assert flags == [option.flag for option in option_table.of(PYTEST)]
    for option in option_table.of(PYTEST):
        assert config.getoption(option.dest) == _default(option), option.flag


def _sections(page: str) -> dict[str, str]:
    """A help page cut at its group headings (a line at column 0 ending with ':')."""
    out: dict[str, str] = {}
    title = ""
    for line in page.splitlines():
        if line and not line[0].isspace() and line.endswith(":"):
            title = line[:-1]
            out[title] = ""
        else:
            out[title] = out.get(title, "") + line + "\n"
    return out


def _listed(text: str) -> set[str]:
    return set(re.findall(r"^\s{2}(--[a-z-]+)", text, flags=re.MULTILINE))


@pytest.mark.parametrize("door", sorted(PARSERS))
def test_each_doors_help_lists_every_option_in_its_group(
    door: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if door == RUN:
        assert cli.main(["run", "--help"]) == 0
        page = capsys.readouterr().out
    else:
        page = PARSERS[door]().format_help()
    sections = _sections(page)
    for title in option_table.GROUPS:
        mine = {o.flag for o in option_table.of(door) if o.group == title}
        assert _listed(sections.get(title, "")) - NOT_OPTIONS == mine, (door, title)


def test_the_plugins_help_lists_every_option(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "--help")
    page = result.stdout.str()
    section = page.split("completions conformance suite:", 1)[1].split("\n\n", 1)[0]
    assert _listed(section) == {option.flag for option in option_table.of(PYTEST)}


def test_contract_reads_the_same_at_every_door() -> None:
    """One declaration: the same help (the page's, naming both contracts) everywhere."""
    contract = option_table.BY_FLAG["--contract"]
    assert contract.doors == {PYTEST, RUN, JUDGE, PROXY}
    for door in (RUN, JUDGE, PROXY):
        page = " ".join(PARSERS[door]().format_help().split())
        assert " ".join(contract.help.split()) in page, door
    # A value the doors refuse: the judge's argparse names the choices, the run's line too.
    with pytest.raises(SystemExit):
        traffic_cli.parser().parse_args(["f.har", "--contract", "openai"])
    assert cli.option_problem(["--contract", "openai"]) is None  # the plugin's to refuse
