"""What a run was taken with reaches results.json, and ``--baseline`` names what differs
(issue 35).

``--max-tokens`` and ``--vocab-size`` never reached results.json, nor did the bounds on an
answer, so ``--baseline`` could not say that two runs capped their requests differently.
Now every option the table (conformance/front/option_table.py) marks as changing what is
sent or how it is judged is recorded in ``meta.options`` with the value the run used, and
a baseline that recorded another value is one warning naming the option; the same values
are no warning at all.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from conformance.front import option_table
from conformance.front.option_table import JUDGED, OPTIONS, RECORDED, SENT, Option
from conformance.front.plugin import SUITE_DIR
from conformance.front.runner import run_suite
from conformance.judging.verdict.recorded_options import differences, shown
from conformance.judging.verdict.results import Results
from conformance.reports import check_baseline
from conformance.run.session import Settings, Setup

RECORDED_OPTIONS = [option for option in OPTIONS if option.records in RECORDED]
#: A value other than the default for every recorded option, as the command line gives
#: it, and as results.json records it.
OTHER: dict[str, tuple[str, Any]] = {
    "--checks": ("MODEL-NOT-FOUND,RESP-ID", ["MODEL-NOT-FOUND", "RESP-ID"]),
    "--skip-checks": ("STOP-ABSENT", ["STOP-ABSENT"]),
    "--require-capabilities": ("echo", ["echo"]),
    "--strict-should": ("", True),
    "--strict-spec": ("", True),
    "--contract": ("document", "document"),
    "--max-examples": ("2", 2),
    "--max-tokens": ("5", 5),
    "--seed": ("3", 3),
    "--fuzz": ("0", 0),  # another value needs the [fuzz] extra: its own test's
    "--vocab-size": ("300", 300),
    "--budget-requests": ("400", 400),
    "--budget-tokens": ("90000", 90000),
    "--request-timeout": ("20", 20.0),
    "--stream-gap": ("10", 10.0),
    "--stream-total": ("100", 100.0),
    "--max-body-bytes": ("1048576", 1048576),
}
#: The options whose value a baseline compares through a meta field of its own (TAKEN_WITH
#: of the baseline check): named once all the same.
LEGACY = {"--seed": "seed", "--max-examples": "max_examples", "--fuzz": "fuzz"}


def _args(values: dict[str, tuple[str, Any]]) -> list[str]:
    args: list[str] = []
    for flag, (text, _) in values.items():
        args += [flag] if option_table.BY_FLAG[flag].kind is bool else [flag, text]
    return args


def _default(option: Option) -> Any:
    if option.kind is bool:
        return False
    if isinstance(option.default, str) and option.records and not option.choices:
        return [v for v in option.default.split(",") if v]  # a comma-separated list
    return option.default


def test_every_recorded_option_is_recorded_with_the_setups_value() -> None:
    """Each recorded option reads the Setup attribute it sets, and a Setup built by hand
    (the public run_suite) records the command line's defaults."""
    assert set(OTHER) == {option.flag for option in RECORDED_OPTIONS}
    recorded = option_table.recorded(Setup())
    assert set(recorded) == {SENT, JUDGED}
    for option in RECORDED_OPTIONS:
        assert option.at is not None, option.flag
        assert recorded[str(option.records)][option.flag] == _default(option), option.flag
    assert {"--max-tokens", "--vocab-size"} <= set(recorded[SENT])
    assert {"--contract", "--strict-spec", "--strict-should"} <= set(recorded[JUDGED])
    # What changes neither what is sent nor how it is judged is not recorded.
    for flag in ("--concurrency", "--rps", "--api-key", "--header", "--report-dir", "--shard"):
        assert option_table.BY_FLAG[flag].records is None, flag
    changed = Setup(settings=Settings(vocab_size=300, max_tokens=5), strict_spec=True)
    again = option_table.recorded(changed)
    assert again[SENT]["--vocab-size"] == 300 and again[SENT]["--max-tokens"] == 5
    assert again[JUDGED]["--strict-spec"] is True


def _taken_with(**changes: Any) -> dict[str, Any]:
    """What a default run is taken with, ``changes`` (option -> recorded value) applied."""
    options = option_table.recorded(Setup())
    mine: dict[str, Any] = {"spec": "aihubmix", "seed": 0, "max_examples": 10, "fuzz": 0}
    for flag, value in changes.items():
        kind = str(option_table.BY_FLAG[flag].records)
        options[kind] = {**options[kind], flag: value}
        if flag in LEGACY:
            mine[LEGACY[flag]] = value
    return {**mine, "options": options}


def _baseline() -> Results:
    results = Results()
    results.info.update(**_taken_with())
    return results


def test_the_same_options_are_no_warning() -> None:
    assert check_baseline(_taken_with(), _baseline()) == ([], [])


@pytest.mark.parametrize("option", RECORDED_OPTIONS, ids=lambda o: o.flag)
def test_another_value_of_a_recorded_option_is_one_warning_naming_it(option: Option) -> None:
    value = OTHER[option.flag][1]
    if value == _default(option):
        value = 1  # --fuzz: any other number
    errors, warnings = check_baseline(_taken_with(**{option.flag: value}), _baseline())
    assert errors == []
    named = f"{option.flag} {shown(_default(option))} (this run: {shown(value)})"
    assert len(warnings) == 1 and warnings[0].count(option.flag) == 1, warnings
    assert named in warnings[0], warnings
    if option.records == SENT:
        assert warnings[0].startswith("the baseline was taken with "), warnings
    else:
        assert warnings[0].startswith("the baseline was judged with "), warnings
    # Both ways: the baseline's value and this run's swap places.
    other = Results()
    other.info.update(**_taken_with(**{option.flag: value}))
    swapped = check_baseline(_taken_with(), other)[1]
    assert f"{option.flag} {shown(value)} (this run: {shown(_default(option))})" in swapped[0]


def test_a_baseline_that_recorded_no_options_is_compared_as_before() -> None:
    """A results.json written before meta.options: its legacy fields still compare."""
    older = Results()
    older.info.update(spec="aihubmix", seed=1, max_examples=10, fuzz=0)
    assert differences(_taken_with(), older.info.taken_with(), SENT) == []
    warnings = check_baseline(_taken_with(), older)[1]
    assert warnings == [
        "the baseline was taken with --seed 1 (this run: 0): its defects are matched by "
        "fingerprint, but requests it never drew may find more"
    ]


def test_results_json_records_the_options_and_reads_them_back(tmp_path: Path) -> None:
    setup = Setup(settings=Settings(max_examples=1, max_tokens=5, vocab_size=300))
    outcome = run_suite(setup, scenarios=(), report_dir=tmp_path)
    meta = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))["meta"]
    assert meta["options"] == option_table.recorded(setup)
    assert meta["options"][SENT]["--vocab-size"] == 300
    assert meta["options"][SENT]["--max-tokens"] == 5
    again = Results.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert again.info.options == outcome.results.info.options == meta["options"]
    from conformance.reports.schema import schema_errors

    assert schema_errors(json.loads((tmp_path / "results.json").read_text())) == []
    bad = {"schema_version": 2, **json.loads((tmp_path / "results.json").read_text())}
    bad["meta"]["options"] = {"sent": {"max-tokens": 5}}  # not an option's name
    assert schema_errors(bad) != []


def test_a_run_against_its_own_baseline_warns_of_nothing_and_of_each_change(
    tmp_path: Path,
) -> None:
    """Through run_suite (the runner's --baseline): the same setup, no warning; another
    --vocab-size and --contract, one line each, naming the option and both values."""
    from conformance.judging.document.contract import Contract

    base = Setup(settings=Settings(max_examples=1))
    run_suite(base, scenarios=(), report_dir=tmp_path / "base")
    baseline = str(tmp_path / "base" / "results.json")
    same = run_suite(replace(base, baseline=baseline), scenarios=()).results
    assert same.info.baseline_warnings is None
    changed = replace(
        base,
        baseline=baseline,
        settings=replace(base.settings, vocab_size=300),
        contract=Contract.DOCUMENT,
    )
    warnings = run_suite(changed, scenarios=()).results.info.baseline_warnings
    assert warnings == (
        "the baseline was taken with --vocab-size 1000 (this run: 300): its defects are "
        "matched by fingerprint, but requests it never drew may find more",
        "the baseline was judged with --contract openai-compatible (this run: document): a "
        "failure new or fixed against it may come from the judging, not from the target",
    )


def test_the_plugin_records_what_its_command_line_said(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """Every recorded option given another value on pytest's command line lands in
    results.json as given; a run at the defaults against it names each one that differs."""
    first = pytester.runpytest_inprocess(
        str(SUITE_DIR), "-p", "no:cacheprovider", "-k", "unknown_model",
        "--report-dir", str(tmp_path / "first"), *_args(OTHER),
    )  # fmt: skip
    results = tmp_path / "first" / "results.json"
    assert results.is_file(), first.stdout.str()
    options = json.loads(results.read_text(encoding="utf-8"))["meta"]["options"]
    for option in RECORDED_OPTIONS:
        assert options[option.records][option.flag] == OTHER[option.flag][1], option.flag
    second = pytester.runpytest_inprocess(
        str(SUITE_DIR), "-p", "no:cacheprovider", "-k", "unknown_model", "--max-examples", "2",
        "--report-dir", str(tmp_path / "second"), "--baseline", str(results),
    )  # fmt: skip
    out = second.stdout.str()
    for option in RECORDED_OPTIONS:
        value = OTHER[option.flag][1]
        if value != _default(option) and option.flag != "--max-examples":
            assert f"{option.flag} {shown(value)} (this run: " in out, option.flag
    assert "--max-examples 2 (this run" not in out  # the same value: not named
