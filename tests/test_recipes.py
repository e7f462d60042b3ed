"""ARCHITECTURE.md's three extension recipes, each kept true by exercising it.

"Add a requirement": a requirement registered with no proving fault is named, with the file
its proof goes in (conformance/front/proofs.py), and it enters the generated catalogue.
"Add a report format": one writer and one entry in ``REPORT_WRITERS`` is all ``write_all``
needs. "Add a document convention": every convention of ``CONVENTIONS`` is detected on a
document the tests hold and described where users read about conventions; one that is not
is named with the file to change.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pytest
from fastapi_document import FIXTURE
from test_reports import make_results

from conformance import reports
from conformance.front.catalogue import render_catalogue
from conformance.front.proofs import EXACT_FILE, PROOFS_FILE, unproven
from conformance.judging.checks import load_checks
from conformance.judging.document.errata import CONVENTIONS, Convention
from conformance.judging.document.spec import BUILTIN_SPECS, load_spec
from conformance.judging.requirements import REGISTRY, Context, Level, Violation, requirement
from conformance.judging.verdict.results import Results

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "ARCHITECTURE.md"
RECIPES = ("Add a requirement", "Add a report format", "Add a document convention")


def recipe(title: str) -> str:
    """The text of one recipe in ARCHITECTURE.md (its heading to the next heading)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^#)", text, re.M | re.S)
    assert match, f"ARCHITECTURE.md has no '### {title}' recipe"
    return match.group(1)


@pytest.mark.parametrize("title", RECIPES)
def test_each_recipe_is_a_short_list_of_steps_naming_files_that_exist(title: str) -> None:
    text = recipe(title)
    steps = re.findall(r"^\d+\. ", text, re.M)
    assert 2 <= len(steps) <= 7, f"{title}: {len(steps)} steps"
    named = set(
        re.findall(r"`((?:conformance|reports|strategies|tests|docs|specs)/[^`\s:]*)", text)
    )
    assert named, f"{title} names no file"
    # A placeholder (`reports/<format>.py`) names its folder; a glob must match something.
    paths = {p.split("<")[0] for p in named}
    missing = sorted(p for p in paths if not any(ROOT.glob(p.removesuffix("/") or ".")))
    assert not missing, f"{title} names files that do not exist: {missing}"


# -- Add a requirement ----------------------------------------------------------------------


@pytest.fixture
def toy_requirement() -> Iterator[str]:
    load_checks()
    rid = "TOY-RECIPE-REQUIREMENT"

    @requirement(
        rid,
        level=Level.SHOULD,
        area="semantics",
        statement="A toy requirement registered by the recipe's test.",
        source="tests/test_recipes.py",
        evidence="server-habit",
    )
    def _toy(ctx: Context) -> None:
        raise Violation("never judged")

    try:
        yield rid
    finally:
        del REGISTRY[rid]


def test_a_requirement_without_a_proof_is_named_with_the_file_to_add_it_to(
    toy_requirement: str,
) -> None:
    (line,) = unproven(set(REGISTRY))
    assert line.startswith(f"{toy_requirement} has no proving fault")
    assert PROOFS_FILE in line and EXACT_FILE in line
    assert "conformance/reference/faults_" in line
    steps = recipe("Add a requirement")
    for path in (PROOFS_FILE, EXACT_FILE, "conformance/judging/checks/", "docs/proof.md"):
        assert path in steps, path


def test_a_new_requirement_enters_the_generated_catalogue(toy_requirement: str) -> None:
    # So docs/requirements.md is stale until the recipe's regeneration step is run
    # (tests/test_reports.py names the command).
    assert toy_requirement in render_catalogue()
    assert "python -m conformance.front.catalogue --write" in recipe("Add a requirement")


def test_every_registered_requirement_is_proven() -> None:
    load_checks()
    assert unproven(set(REGISTRY)) == []


# -- Add a report format --------------------------------------------------------------------


def write_toy(results: Results, path: Path) -> Path:
    path.write_text(f"{len(results.tallies)} requirements\n", encoding="utf-8")
    return path


def test_a_report_format_is_one_writer_and_one_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = make_results()
    monkeypatch.setitem(reports.REPORT_WRITERS, "toy.txt", write_toy)
    written = reports.write_all(results, tmp_path)
    assert [p.name for p in written] == list(reports.REPORT_WRITERS)
    assert (tmp_path / "toy.txt").read_text() == f"{len(results.tallies)} requirements\n"
    assert "REPORT_WRITERS" in recipe("Add a report format")


def test_every_report_writer_lives_in_the_reports_package() -> None:
    for name, write in reports.REPORT_WRITERS.items():
        assert write.__module__.startswith("conformance.reports"), name
        assert name in (ROOT / "README.md").read_text(encoding="utf-8"), (
            f"{name}: name the report in README.md's list of reports"
        )


# -- Add a document convention --------------------------------------------------------------

CONVENTION_DOCS = ("specs/README.md", "docs/any-document.md")
DETECTION = "conformance/judging/document/spec.py"
DOCUMENTS_WITH_CONVENTIONS = "tests/test_spec_conventions.py"


def documents() -> list[str]:
    """Every document the tests hold: the vendored ones and the fixtures."""
    return [*BUILTIN_SPECS, *(str(p) for p in sorted((ROOT / "tests/fixtures").glob("*.json")))]


def convention_problems(
    conventions: Sequence[Convention], detected: Iterable[str], texts: dict[str, str]
) -> list[str]:
    """One line per convention not detected on any document, or not described, naming the
    file to change."""
    seen = set(detected)
    problems = [
        f"convention {c.id} is detected on no document: detect it in {DETECTION} "
        f"(Spec._build, self.conventions.append) and prove it on a document in "
        f"{DOCUMENTS_WITH_CONVENTIONS}"
        for c in conventions
        if c.id not in seen
    ]
    problems += [
        f"convention {c.id} is not described in {name}"
        for c in conventions
        for name, text in texts.items()
        if c.id not in text
    ]
    known = {c.id for c in conventions}
    problems += [
        f"convention {cid} is detected but not in CONVENTIONS of conformance/judging/document/errata.py"
        for cid in sorted(seen - known)
    ]
    return problems


def _detected() -> set[str]:
    return {c.id for name in documents() for c in load_spec(name).conventions}


def _texts() -> dict[str, str]:
    return {name: (ROOT / name).read_text(encoding="utf-8") for name in CONVENTION_DOCS}


def test_every_convention_is_detected_and_described() -> None:
    assert str(FIXTURE) in documents()
    problems = convention_problems(CONVENTIONS, _detected(), _texts())
    assert not problems, "\n".join(problems)


def test_a_convention_without_detection_or_description_is_named_with_where_to_add_it() -> None:
    toy = Convention("toy-recipe-convention", "a toy", "never detected")
    problems = convention_problems((*CONVENTIONS, toy), _detected(), _texts())
    assert len(problems) == 1 + len(CONVENTION_DOCS)
    assert DETECTION in problems[0] and DOCUMENTS_WITH_CONVENTIONS in problems[0]
    assert all(toy.id in p for p in problems)
    assert [p.rsplit(" ", 1)[1] for p in problems[1:]] == list(CONVENTION_DOCS)
    steps = recipe("Add a document convention")
    for path in ("conformance/judging/document/errata.py", DETECTION, *CONVENTION_DOCS):
        assert path in steps, path
