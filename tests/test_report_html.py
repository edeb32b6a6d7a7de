"""The HTML report renders in headless Chromium (Debian's `chromium`, installed by `make test`) with its charts
drawn. Not skipped when Chromium is missing: the test setup installs it, so its absence is a failure."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.quality_seed import seed_everything
from worker.report import build_report, write_html
from worker.store import connect, migrate

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1280, 2400


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    assert shutil.which(CHROMIUM), "chromium is missing: `make test` installs it (apt-get install chromium)"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=True)


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report")
    client = connect(f"chdb://{root / 'chdb'}")
    migrate(client)
    seed_everything(client, now=NOW)
    report = build_report(client, now=NOW)
    client.close()
    return write_html(report, root / "report.html")


def _png_pixels(path: Path) -> tuple[int, int, bytes]:
    """(width, height, the decompressed scanlines) of a PNG, read with the standard library only."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    idat, offset = b"", 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        if kind == b"IDAT":
            idat += data[offset + 8:offset + 8 + length]
        offset += 12 + length
    return width, height, zlib.decompress(idat)


def test_the_page_renders_in_headless_chromium_to_a_screenshot_with_something_drawn(page, tmp_path):
    shot = tmp_path / "report.png"

    _chromium(tmp_path, f"--screenshot={shot}", f"--window-size={WIDTH},{HEIGHT}", page.as_uri())

    width, height, pixels = _png_pixels(shot)
    assert (width, height) == (WIDTH, HEIGHT)
    assert len(set(pixels)) > 64  # many colours: lines, bars, text; a blank page has a handful


def test_the_charts_are_laid_out_with_their_lines_and_bars_in_the_rendered_dom(page, tmp_path):
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout

    charts = dict(re.findall(r'<svg class="chart" data-chart="([^"]+)"[^>]*data-drawn-width="(\d+)"', dom))
    assert {"score-over-time", "funnel-alignment", "funnel-relevancy", "distribution-alignment",
            "distribution-relevancy", "queue-lag"} <= set(charts)
    assert all(int(width) > 0 for width in charts.values())
    score_chart = dom[dom.index('data-chart="score-over-time"'):]
    score_chart = score_chart[:score_chart.index("</svg>")]
    assert score_chart.count('<path class="series"') == 8  # 2 agents × 2 monitors × 2 scorer versions
    funnel = dom[dom.index('data-chart="funnel-relevancy"'):]
    assert [label for label in re.findall(r'<rect class="bar" data-label="(\w+)"', funnel)[:6]] == [
        "received", "sampled", "scored", "abstained", "unscored", "failed"]
    assert "Worst turns" in dom and "answer was off-topic" in dom
