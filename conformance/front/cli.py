"""``completions-conformance``: the suite's own command line, with pytest behind it.

    completions-conformance [run] [OPTIONS] [-- PYTEST-OPTIONS]
    completions-conformance serve|merge|compare|gate|judge|proxy ...

``run`` (the default) is ``pytest --pyargs conformance`` with the given options: the same
options, behaviour and exit codes as ``pytest conformance`` in a checkout. Its ``--help``
shows the suite's options grouped by what a user decides (target, selection, spending,
reports) and the verdicts with their exit codes; pytest's own ~400 lines of options are
one ``--help-pytest`` away, and pytest options may be given anywhere or after ``--``.
``serve`` is ``python -m conformance.reference``, ``merge`` is ``conformance-merge``,
``compare`` is ``conformance-compare``; ``gate`` runs shards, merges them and posts the
summary (conformance/front/gate.py, the GitHub Action's step).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn

from conformance.front.arguments import PROG
from conformance.judging.exceptions import ConformanceError
from conformance.judging.verdict.outcomes import BAD_INPUT, OUTCOMES

#: Plugins of installed packages the suite does not use (as in pyproject's addopts):
#: schemathesis's ([fuzz] extra) costs 0.5 s of CPU, anyio's 0.4 s, platformdirs' 0.1 s.
UNUSED_PLUGINS = ("-p", "no:schemathesis", "-p", "no:anyio", "-p", "no:platformdirs")
#: This command imports the ``conformance`` package before pytest starts, so pytest cannot
#: rewrite it and says so. The suite does not want its library rewritten anyway (plugin.
#: rewrite_no_library), so that one warning, for this package alone, is not shown.
ALREADY_IMPORTED = (
    "-W",
    "ignore:Module already imported so cannot be rewritten; conformance"
    ":pytest.PytestAssertRewriteWarning",
)


class _Parser(argparse.ArgumentParser):
    """The help page's parser; as a checker, its errors are raised, not printed with usage."""

    def error(self, message: str) -> NoReturn:
        raise _OptionError(message)


class _OptionError(ConformanceError):
    """A suite option argparse refused (its message is the one line to show)."""


def option_problem(args: list[str]) -> str | None:
    """What argparse finds wrong with the suite's own options among ``args`` (an option
    without its value...), in one line; pytest's options and the rest are pytest's."""
    try:
        help_parser().parse_known_args(args)
    except _OptionError as exc:
        return str(exc).removeprefix("argument ")
    return None


def help_parser() -> argparse.ArgumentParser:
    """The help page of ``run``: the suite's options from the one table, grouped."""
    from conformance.front import option_table

    parser = _Parser(
        prog=PROG,
        allow_abbrev=False,  # as pytest's: --max is no option, not an ambiguous one
        usage=f"{PROG} [run] [OPTIONS] [-- PYTEST-OPTIONS]\n"
        f"       {PROG} serve|merge|compare|gate|judge|proxy [--help] ...",
        description="Test an OpenAI-compatible POST /v1/completions API against its OpenAPI\n"
        "document; write junit.xml, report.html, results.json and summary.md; exit with\n"
        "the verdict. Without --target-url it tests the embedded reference target.",
        epilog=_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    # Every option in its group (conformance/front/option_table.py), no default: the page
    # says each one, and as a checker the parser must not fill in what was not given.
    option_table.add_arguments(parser, option_table.RUN, defaults=False)
    general = parser.add_argument_group("help")
    general.add_argument("-h", "--help", action="store_true", help="this page")
    general.add_argument(
        "--help-pytest", action="store_true", help="pytest's own options (-k, -x, -n, ...)"
    )
    return parser


def _epilog() -> str:
    verdicts = "\n".join(f"  {o.word:<11} {o.exit_code:<3}  {o.when}" for o in OUTCOMES)
    return f"""\
verdict and exit status (the run's last line says which, and why):
{verdicts}

pytest's options (-k EXPR, -x, -q, -n N with pytest-xdist, --junitxml ...) work too,
anywhere on the line or after --; list them with --help-pytest.

other jobs:
  {PROG} serve [--flavor aihubmix|nscale] [--port N] [--fault NAME]...
      serve the embedded reference target (python -m conformance.reference)
  {PROG} merge SHARD.json... [--report-dir DIR] [--baseline FILE]
      one report and one verdict from the shards of a run (conformance-merge)
  {PROG} compare RUN.json... [--names a,b] [--html F] [--md F]
      compare runs against several targets side by side (conformance-compare)
  {PROG} gate [--shards N] [--baseline FILE] OPTIONS...
      a CI gate: shards at once, merged, summary to $GITHUB_STEP_SUMMARY (the Action)
  {PROG} judge FILE... [--spec NAME|PATH] [--report-dir DIR]
      judge recorded traffic: HAR (devtools, mitmproxy), transcripts, JSONL
  {PROG} proxy --upstream URL [--listen HOST:PORT] [--sample RATE] [--har FILE]
      a reverse proxy that judges the live traffic; verdict at /_conformance/

The reports (default reports/out/) say what failed, what was not tested and why.
"""


def run(args: list[str]) -> int:
    """``pytest --pyargs conformance`` with the suite's and pytest's options."""
    if "--" in args:
        cut = args.index("--")
        ours, theirs = args[:cut], args[cut + 1 :]
    else:
        ours, theirs = args, []
    if "--help-pytest" in ours:
        ours = [a for a in ours if a != "--help-pytest"] + ["--help"]
        print(
            f"pytest's own options, which {PROG} passes on to pytest (its own options: "
            f"{PROG} --help).\n"
        )
    elif "-h" in ours or "--help" in ours:
        help_parser().print_help()
        return 0
    elif bad := option_problem(ours):
        # One line, like every bad input (the plugin refuses the other words the same way).
        print(f"ERROR: conformance: {bad}", file=sys.stderr)
        return BAD_INPUT

    from conformance.front import interrupt

    # While pytest starts, a Ctrl-C quits in one line (the plugin takes over once it can).
    restore = interrupt.on_sigint(interrupt.quit_at_once(interrupt.EARLY))
    fixed = ["--pyargs", "conformance", "-p", "no:cacheprovider", *UNUSED_PLUGINS]
    try:
        # Ours last: of pytest's -W filters the last given wins (a user's "-W error" included).
        return _pytest_main([*fixed, *ours, *theirs, *ALREADY_IMPORTED])
    finally:
        restore()


def _pytest_main(args: list[str]) -> int:
    """``pytest.main(args)``, with pytest's usage lines naming this command rather than
    ``pytest.main()`` where pytest allows it (its ``_main``, private: else pytest.main)."""
    import inspect

    import pytest

    try:
        from _pytest.config import _main
    except ImportError:
        return int(pytest.main(args))
    if not {"args", "plugins", "prog"} <= set(inspect.signature(_main).parameters):
        return int(pytest.main(args))
    return int(_main(args=args, plugins=None, prog=PROG))


def _serve(args: list[str]) -> int:
    from conformance.reference.__main__ import main

    return main(args)


def _merge(args: list[str]) -> int:
    from conformance.front.merge import main

    return main(args)


def _compare(args: list[str]) -> int:
    from conformance.front.compare import main

    return main(args)


def _gate(args: list[str]) -> int:
    from conformance.front.gate import main

    return main(args)


def _judge(args: list[str]) -> int:
    from conformance.front.traffic_cli import main

    return main(args)


def _proxy(args: list[str]) -> int:
    from conformance.front.proxy import main

    return main(args)


SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {
    "run": run,
    "serve": _serve,
    "merge": _merge,
    "compare": _compare,
    "gate": _gate,
    "judge": _judge,
    "proxy": _proxy,
}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in SUBCOMMANDS:
        return SUBCOMMANDS[args[0]](args[1:])
    return run(args)
