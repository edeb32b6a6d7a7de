"""`vigil report --serve` as a real process: the page and its JSON answer only to a loopback Host header, so a web
page cannot read the report through a DNS name rebound to 127.0.0.1."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.abuse import raw_request
from tests.pipeline import migrated_home


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """One migrated store served for the module's tests, which only read it."""
    env = {k: v for k, v in os.environ.items() if k not in ("CLICKHOUSE_DSN", "VIGIL_CONFIG", "REDIS_URL")}
    env["VIGIL_HOME"] = str(migrated_home(tmp_path_factory.mktemp("host-header") / "vigil"))
    process = subprocess.Popen([sys.executable, "-m", "vigil.worker", "report", "--serve", "--port", "0"], env=env,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    line = process.stderr.readline()  # "serving the report on http://127.0.0.1:PORT/ ..."
    match = re.search(r"127\.0\.0\.1:(\d+)", line)
    assert match, line
    yield int(match.group(1))
    process.terminate()
    process.wait(30)


@pytest.mark.parametrize("path", ["/", "/report.json"])
def test_a_foreign_host_header_gets_403_and_no_report(served, path):
    status, _, body = raw_request(served, "GET", path, {"Host": f"attacker.example:{served}"})

    assert status == 403
    assert b"monitors" not in body


def test_the_loopback_host_still_gets_the_report(served):
    status, headers, body = raw_request(served, "GET", "/report.json", {"Host": f"127.0.0.1:{served}"})

    assert status == 200 and headers["content-type"] == "application/json"
    assert b"monitors" in body
