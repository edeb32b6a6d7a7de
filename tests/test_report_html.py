"""The HTML report renders in headless Chromium (Debian's `chromium`, installed by `make system-deps`) with its
charts drawn. Not skipped when Chromium is missing: CI installs it, so its absence is a failure."""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import zlib
from datetime import UTC, datetime
from html import escape
from pathlib import Path
from typing import NamedTuple

import pytest
from vigil.worker.demo import demo_turns
from vigil.worker.report import build_report, write_html
from vigil.worker.report.build import MIN_TURNS_PER_BUCKET
from vigil.worker.store import connect, migrate

from tests.quality_seed import seed_everything

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1280, 2400


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    assert shutil.which(CHROMIUM), "chromium is missing: `make system-deps` installs it (apt-get install chromium)"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=True)


@pytest.fixture(scope="module")
def seeded_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("report")
    client = connect(f"chdb://{root / 'chdb'}")
    migrate(client)
    seed_everything(client, now=NOW)
    report = build_report(client, now=NOW)
    client.close()
    return report, write_html(report, root / "report.html")


@pytest.fixture(scope="module")
def page(seeded_report) -> Path:
    return seeded_report[1]


@pytest.fixture
def demo_home(vigil_demo) -> Path:
    """The home `vigil demo` left (conftest's ``vigil_demo``, run once per session): its store and its report.html."""
    return vigil_demo.home


def _chart(dom: str, name: str) -> str:
    start = dom.index(f'data-chart="{name}"')
    return dom[start:dom.index("</svg>", start)]


_DOT = re.compile(r'<circle class="dot" cx="[\d.]+" cy="([\d.]+)"[^>]*><title>([\d-]+ [\d:]+): mean ([\d.]+) of (\d+) '
                  r'turns(?:, 95% interval ([\d.]+)–([\d.]+))?</title>')


class Dot(NamedTuple):
    """One bucket drawn on a chart: where its dot is (y pixel: lower on the page is a lower score), when the bucket
    starts, and what its tooltip says."""

    y: float
    start: datetime
    mean: float
    turns: int
    low: float | None
    high: float | None


def _dots(chart: str) -> list[Dot]:
    """Each bucket drawn, left to right."""
    return [Dot(float(cy), datetime.fromisoformat(start).replace(tzinfo=UTC), float(mean), int(n),
                float(lo) if lo else None, float(hi) if hi else None)
            for cy, start, mean, n, lo, hi in _DOT.findall(chart)]


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

    charts = dict(re.findall(r'<svg class="chart[^"]*" data-chart="([^"]+)"[^>]*data-drawn-width="(\d+)"', dom))
    assert {"monitor-relevancy-support-bot", "monitor-alignment-assistant", "funnel-alignment", "funnel-relevancy",
            "distribution-alignment", "distribution-relevancy", "queue-lag"} <= set(charts)
    assert all(int(width) > 0 for width in charts.values())
    funnel = dom[dom.index('data-chart="funnel-relevancy"'):]
    assert [label for label in re.findall(r'<rect class="bar" data-label="(\w+)"', funnel)[:7]] == [
        "received", "sampled", "scored", "abstained", "unscored", "not_applicable", "failed"]
    assert "Worst turns" in dom and "answer was off-topic" in dom


def test_each_monitor_gets_one_small_chart_with_its_95_percent_band_and_labelled_axes(seeded_report, tmp_path):
    report, page = seeded_report
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout

    drawn = re.findall(r'<svg class="chart monitor-chart" data-chart="monitor-([^"]+)"[^>]*data-drawn-width="(\d+)"',
                       dom)
    expected = {f"{m.monitor}-{m.agent}" for m in report.monitors if m.scored}
    assert sorted(name for name, _ in drawn) == sorted(expected)  # one each, no more
    for name, width in drawn:
        chart = _chart(dom, f"monitor-{name}")
        assert int(width) > 0 and re.search(r'class="band" d="M[^"]+ Z"', chart), f"{name} has no interval band"
        assert ">mean score</text>" in chart and "time (UTC), buckets of" in chart
        for dot in _dots(chart):
            assert dot.low is not None and dot.low <= dot.mean <= dot.high
    assert 'class="alert-mark firing"' in _chart(dom, "monitor-relevancy-support-bot")  # the seeded firing alert


def test_the_score_histograms_have_a_labelled_count_axis(page, tmp_path):
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout

    histogram = _chart(dom, "distribution-relevancy")

    assert ">turns</text>" in histogram and ">score (0..1)</text>" in histogram
    assert len(re.findall(r'<text class="tick"[^>]*text-anchor="end">\d+</text>', histogram)) == 3


def test_worst_turns_are_listed_per_monitor_with_question_answer_and_reason(seeded_report):
    report, page = seeded_report
    html = page.read_text()

    assert {w.monitor for w in report.worst_turns} == {"relevancy", "alignment"}
    worst = html[html.index("Worst turns per monitor"):]
    for monitor in ("alignment", "relevancy"):
        table = worst[worst.index(f'<h3 class="worst" data-monitor="{monitor}">'):]
        table = table[:table.index("</table>")]
        rows = re.findall(r"<tr><td", table)
        assert 0 < len(rows) <= 5
        assert '<td class="question">' in table and '<td class="answer">' in table and "answer was off-topic" in table


def test_the_demos_regression_shows_as_a_drop_beyond_the_interval_in_the_support_bots_charts(demo_home, tmp_path):
    """The demo's own report.html: every bucket of the support bot's chart from the one its v2 release began in is
    drawn below every earlier bucket (buckets of at least MIN_TURNS_PER_BUCKET turns), and the fullest of them has its
    whole 95% interval under the earlier turns' mean.

    Buckets start on whole multiples of their width (a day on the demo's week of history), so the release's turns
    fall in one bucket or two depending on the hour the demo ran: between midnight and the release's second hour UTC
    the newest bucket holds a few of them, and the one before holds the rest and the old release's last turns. The
    release is therefore found from the store, as the first turn on the model the demo's data gives v2, not from the
    chart's last dot."""
    dom = _chromium(tmp_path, "--dump-dom", (demo_home / "report.html").as_uri()).stdout
    models = {t["model"] for t in demo_turns() if t["agent"] == "support-bot" and t["metadata"]["release"] == "v2"}
    client = connect(f"chdb://{demo_home / 'chdb'}")
    released = client.query("SELECT min(started_at) FROM traces FINAL WHERE agent = 'support-bot' AND model IN {m:Array(String)}",
                            parameters={"m": sorted(models)}).result_rows[0][0].replace(tzinfo=UTC)
    client.close()

    for monitor in ("answer_relevancy", "context_relevance", "rag_correctness"):
        dots = _dots(_chart(dom, f"monitor-{monitor}-support-bot"))
        width = min(b.start - a.start for a, b in zip(dots, dots[1:], strict=False))
        before = [d for d in dots if d.start + width <= released]
        after = [d for d in dots if d.start + width > released and d.turns >= MIN_TURNS_PER_BUCKET]
        earlier_mean = sum(d.mean * d.turns for d in before) / sum(d.turns for d in before)
        assert after, f"{monitor}: no bucket of {MIN_TURNS_PER_BUCKET} turns from the release on"
        lowest_before = max(d.y for d in before if d.turns >= MIN_TURNS_PER_BUCKET)
        assert all(d.y > lowest_before for d in after), f"{monitor}: {after} vs {before}"
        fullest = max(after, key=lambda d: d.turns)
        assert fullest.high is not None and fullest.high < earlier_mean, \
            f"{monitor}: {fullest} vs earlier mean {earlier_mean:.2f}"


def test_a_report_of_the_demos_store_marks_the_alerts_where_they_fired(demo_home, tmp_path):
    client = connect(f"chdb://{demo_home / 'chdb'}")
    report = build_report(client)
    client.close()
    page = write_html(report, tmp_path / "report.html")

    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout

    # A regression alert is per monitor across agents; it names the agents whose scores fell (the support bot) and
    # is marked on their charts only, shaded from the change it names, in the overview and in "What is firing".
    firing = report.status.firing
    assert {(a.monitor, tuple(a.agents)) for a in firing} == {("answer_relevancy", ("support-bot",)),
                                                              ("rag_correctness", ("support-bot",))}
    for alert in firing:
        for kind in ("monitor", "firing"):
            chart = _chart(dom, f"{kind}-{alert.monitor}-support-bot")
            assert f'class="alert-mark firing" data-start="{alert.since.isoformat()}"' in chart
    for agent in ("code-helper", "travel-assistant"):
        assert "alert-mark" not in _chart(dom, f"monitor-answer_relevancy-{agent}"), "not about that agent"
    assert "alert-mark" not in _chart(dom, "monitor-prompt_alignment-travel-assistant")


def test_the_demos_report_opens_on_its_status_the_firing_alerts_first(demo_home, tmp_path):
    """The first thing on the page is the status: each firing alert's sentence (linked to its agent's chart under
    "What is firing"), then fine and waiting monitors, judges, coverage and the heuristic's label; every chart states
    one bucket width, the same in its head and on its axis; the demo's back-dated turns are not read as queue lag."""
    client = connect(f"chdb://{demo_home / 'chdb'}")
    report = build_report(client)
    client.close()
    html = write_html(report, tmp_path / "report.html").read_text(encoding="utf-8")

    status = html[html.index('<section id="status"'):html.index("</section>", html.index('<section id="status"'))]
    assert html.index('<section id="status"') < html.index("<svg"), "the status comes before any chart"
    assert status.count('class="alert-line"') == 2 and "2 alerts firing" in status
    for alert in report.status.firing:
        assert escape(alert.message) in status
        assert f'href="#firing-{alert.monitor}-support-bot"' in status
        assert f'id="firing-{alert.monitor}-support-bot"' in html
    assert "offline baseline heuristic" in status and "coverage:" in status and "judges: none paused" in status
    assert "buckets of" not in html[:html.index('<section id="status"')], "the header claims no bucket width"
    for block in re.findall(r'<div class="monitor-block".*?</svg>', html, re.DOTALL):
        head, axis = re.findall(r"buckets of (\d+ (?:min|h|d))", block)
        assert head == axis
    assert all(p.p95_s is None or p.p95_s < 3600 for p in report.queue_lag), "back-dated turns are not lag"
