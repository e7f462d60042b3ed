"""A plain (non-editable) install works from another directory and finds its specs."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # A report written into the checkout (the main job's default reports/out) is not shipped.
    probe = ROOT / "reports" / "out" / "wheel-probe.json"
    probe.parent.mkdir(parents=True, exist_ok=True)
    probe.write_text("{}", encoding="utf-8")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
    )
    probe.unlink()
    return next(out.glob("*.whl"))


def test_wheel_carries_packages_specs_and_entry_point(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "conformance/_specs/nscale.yaml" in names
    assert "conformance/_specs/aihubmix.yaml" in names
    assert "conformance/_specs/openai.yaml" in names
    assert "conformance/py.typed" in names  # the public API is typed for its users
    # One top-level package: the generator and the reports are installed inside it, under
    # names that cannot collide with another distribution's (``strategies``, ``reports``).
    assert {n.split("/")[0] for n in names if "/" in n} == {
        "conformance",
        "completions_conformance-0.1.0.dist-info",
    }
    assert "conformance/strategies/_draw.py" in names
    assert "conformance/strategies/py.typed" in names and "conformance/reports/py.typed" in names
    assert any(n.startswith("conformance/reports/") and n.endswith(".j2") for n in names)
    assert not any("/out/" in n for n in names)
    # Each file once: the checkout's symlinks are not followed into a second copy.
    assert len(names) == len(set(names))
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[pytest11]" in text and "conformance = conformance.front.plugin" in text
    assert not any(n.startswith("tests/") for n in names)


@pytest.mark.exhaustive  # installs the wheel and its dependencies into a new site directory
def test_installed_copy_runs_the_suite_from_elsewhere(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(site),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = subprocess.run(
        [
            sys.executable,
            "-c",
            "from conformance.judging.spec import load_spec; print(load_spec('nscale').path)",
        ],
        cwd=elsewhere,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    assert where.stdout.strip().startswith(str(site))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "conformance",
            "-p",
            "no:cacheprovider",
            "--max-examples",
            "2",
            "--report-dir",
            "out",
            "-q",
        ],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert (elsewhere / "out" / "junit.xml").is_file()


def test_console_script_runs_the_suite_from_elsewhere(wheel: Path, tmp_path: Path) -> None:
    """``completions-conformance`` (also ``python -m conformance``) needs no checkout."""
    names = zipfile.ZipFile(wheel).namelist()
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "completions-conformance = conformance.__main__:main" in text
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
        check=True,
        capture_output=True,
    )  # fmt: skip
    assert (site / "bin" / "completions-conformance").is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = subprocess.run(
        [sys.executable, "-m", "conformance", "--spec", "nscale", "--max-examples", "1",
         "--report-dir", "out", "-q", "-k", "unknown_model or bad_requests"],
        cwd=elsewhere,
        env={**os.environ, "PYTHONPATH": str(site)},
        capture_output=True,
        text=True,
        timeout=300,
    )  # fmt: skip
    # Two scenarios alone leave MUSTs untested: the installed copy says so (exit 7).
    assert run.returncode == 7, run.stdout + run.stderr
    assert "verdict: incomplete" in run.stdout
    assert (elsewhere / "out" / "results.json").is_file()
    # Not even pytest's "already imported, cannot be rewritten" about this package.
    assert "warning" not in (run.stdout + run.stderr).lower(), run.stdout + run.stderr
