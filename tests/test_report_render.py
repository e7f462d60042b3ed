"""The HTML report renders in a real browser, offline (headless Chromium screenshot)."""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conformance.front.demo import demo_results
from conformance.reports import write_html

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WIDTH, HEIGHT = 1280, 2000


def _chromium() -> str | None:
    for candidate in ("/usr/bin/chromium", "chromium", "chromium-browser"):
        found = shutil.which(candidate)
        if found:
            return found
    return None


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's IHDR chunk."""
    assert data[:8] == PNG_SIGNATURE, "not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_screenshot_in_headless_chromium(tmp_path: Path) -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium not installed: apt-get install chromium")
    # One MUST failure with an SSE transcript, errata, capabilities and latency.
    page = write_html(demo_results(), tmp_path / "report.html")
    shot = tmp_path / "report.png"
    command = [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        f"--screenshot={shot}",
        f"--window-size={WIDTH},{HEIGHT}",
        page.resolve().as_uri(),
    ]
    try:
        done = subprocess.run(command, capture_output=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("headless chromium did not finish within 60 s")
    assert shot.exists(), done.stderr.decode(errors="replace")[-2000:]
    data = shot.read_bytes()
    # A blank page of this size compresses to a few KB; a rendered report is far larger.
    assert len(data) > 50_000, f"screenshot only {len(data)} bytes: blank page?"
    assert png_size(data) == (WIDTH, HEIGHT)


def test_png_size_reads_the_header() -> None:
    header = PNG_SIGNATURE + struct.pack(">I", 13) + b"IHDR" + struct.pack(">II", 7, 9)
    assert png_size(header + b"\x08\x06\x00\x00\x00") == (7, 9)
