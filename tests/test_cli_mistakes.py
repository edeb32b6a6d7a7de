"""Every ordinary CLI mistake is one line on stderr, a non-zero exit, no traceback and no password.

Each case runs the real ``vigil`` command in a subprocess (so anything a driver or chDB writes to stderr counts),
against real parts: an empty chDB directory, a real Redis, a closed port where a server should be.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field

import pytest

from tests.pipeline import migrated_home

SECRET = "s3cret-pw"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Case:
    name: str
    args: list[str]
    says: str  # a fragment the one line must contain: the error names what is wrong
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)  # written under tmp_path; "{tmp}" in args/env is replaced


BROKEN_YAML = "judges: [{name: b, kind: baseline\nmonitors: []\n"
BASE = "judges: [{name: b, kind: baseline}]\n"
KEYED = "judges: [{name: gpt, base_url: 'https://judge.example/v1', model: m, api_key_env: VIGIL_TEST_UNSET_KEY}]\n"
CASES = [
    Case("report on a store nothing was written to", ["report"], "no vigil tables yet"),
    Case("report --json with ClickHouse unreachable", ["report", "--json"], "cannot reach ClickHouse",
         {"CLICKHOUSE_DSN": f"http://default:{SECRET}@127.0.0.1:{{port}}"}),
    Case("migrate with ClickHouse unreachable", ["migrate"], "cannot reach ClickHouse",
         {"CLICKHOUSE_DSN": f"http://default:{SECRET}@127.0.0.1:{{port}}"}),
    Case("alerts check with ClickHouse unreachable", ["alerts", "check"], "cannot reach ClickHouse",
         {"CLICKHOUSE_DSN": f"http://default:{SECRET}@127.0.0.1:{{port}}"}),
    Case("a CLICKHOUSE_DSN with a scheme vigil cannot open", ["report"], "CLICKHOUSE_DSN=postgres://app:***@db",
         {"CLICKHOUSE_DSN": f"postgres://app:{SECRET}@db:5432/x"}),
    Case("config check on broken YAML", ["config", "check", "{tmp}/broken.yaml"], "not valid YAML at line",
         files={"broken.yaml": BROKEN_YAML}),
    Case("config check on a file that does not exist", ["config", "check", "{tmp}/missing.yaml"],
         "No such file"),
    Case("config check with a misspelt scorer param", ["config", "check", "{tmp}/typo.yaml"],
         "monitors.0.params.uncertanty_weight (a): Extra inputs are not permitted",
         files={"typo.yaml": BASE + "monitors: [{name: a, scorer: answer_relevancy, judge: b, "
                                    "params: {uncertanty_weight: 0.3}}]\n"}),
    Case("config check with a param value the scorer does not take", ["config", "check", "{tmp}/mode.yaml"],
         "monitors.0.params.evaluation_mode (p)",
         files={"mode.yaml": BASE + "monitors: [{name: p, scorer: prompt_alignment, judge: b, "
                                    "params: {evaluation_mode: bothh}}]\n"}),
    Case("config check with a retriever path that does not exist", ["config", "check", "{tmp}/kb.yaml"],
         "monitors.0.params.retriever.path: '{tmp}/no-kb.jsonl' does not exist",
         files={"kb.yaml": BASE + "monitors: [{name: r, scorer: rag_correctness, judge: b, "
                                  "params: {retriever: {path: '{tmp}/no-kb.jsonl'}}}]\n"}),
    Case("a worker started on an invalid config", ["worker"], "monitors.0.sampling_rat: Extra inputs",
         {"VIGIL_CONFIG": "{tmp}/rat.yaml", "REDIS_URL": f"redis://:{SECRET}@127.0.0.1:{{port}}/0"},
         {"rat.yaml": BASE + "monitors: [{name: a, scorer: answer_relevancy, judge: b, sampling_rat: 0.5}]\n"}),
    Case("a worker started without VIGIL_CONFIG", ["worker"], "VIGIL_CONFIG is not set", {"REDIS_URL": "{redis}"}),
    Case("a worker whose broker is unreachable", ["worker", "--broker-wait", "0"],
         "cannot reach the broker at 127.0.0.1:{port} (REDIS_URL): Connection refused",
         {"VIGIL_CONFIG": "{tmp}/ok.yaml", "REDIS_URL": f"redis://:{SECRET}@127.0.0.1:{{port}}/0"}, {"ok.yaml": BASE}),
    Case("beat with its broker unreachable", ["beat", "--broker-wait", "0"],
         "cannot reach the broker at 127.0.0.1:{port} (REDIS_URL): Connection refused",
         {"REDIS_URL": f"redis://:{SECRET}@127.0.0.1:{{port}}/0"}),
    Case("intake with its broker unreachable", ["intake", "--broker-wait", "0"],
         "cannot reach the broker at 127.0.0.1:{port} (REDIS_URL): Connection refused",
         {"REDIS_URL": f"redis://:{SECRET}@127.0.0.1:{{port}}/0"}),
    Case("config check with a judge key variable that is not set", ["config", "check", "{tmp}/key.yaml"],
         "judges.0.api_key_env (gpt): VIGIL_TEST_UNSET_KEY is not set in this environment", files={"key.yaml": KEYED}),
    Case("a worker started with a judge key variable that is not set", ["worker"],
         "judges.0.api_key_env (gpt): VIGIL_TEST_UNSET_KEY is not set", {"VIGIL_CONFIG": "{tmp}/key.yaml",
                                                                         "REDIS_URL": "{redis}"}, {"key.yaml": KEYED}),
    Case("judge status with Redis unreachable", ["judge", "status"], "cannot reach Redis",
         {"REDIS_URL": f"redis://:{SECRET}@127.0.0.1:{{port}}/0"}),
    Case("judge status without REDIS_URL", ["judge", "status"], "REDIS_URL is not set"),
    Case("judge resume of a judge that is not paused", ["judge", "resume", "nonexistent"],
         "judge 'nonexistent' is not paused", {"REDIS_URL": "{redis}"}),
    Case("judge resume of a judge the config does not name", ["judge", "resume", "gtp"], "unknown judge 'gtp'",
         {"REDIS_URL": "{redis}", "VIGIL_CONFIG": "{tmp}/ok.yaml"}, {"ok.yaml": BASE}),
    Case("score with an unreachable judge fails within its --timeout",
         ["score", "--scorer", "answer_relevancy", "--trace", "{tmp}/turn.json", "--judge-base-url",
          f"http://key:{SECRET}@127.0.0.1:{{port}}/v1", "--model", "m", "--timeout", "2"],
         "the score failed (connection_error)",
         files={"turn.json": json.dumps({"trace_id": "t1", "project": "p", "agent": "a", "output": "Hello.",
                                         "input": [{"role": "user", "content": "Hi?"}]})}),
    Case("score with a trace file that does not exist",
         ["score", "--scorer", "answer_relevancy", "--trace", "{tmp}/nope.json"], "does not exist"),
    Case("score with a trace that is not a turn", ["score", "--scorer", "answer_relevancy", "--trace",
                                                   "{tmp}/bad.json"], "not a turn: agent: Field required",
         files={"bad.json": "{\"trace_id\": \"t\"}"}),
    Case("an unknown scorer", ["score", "--scorer", "nope", "--trace", "{tmp}/bad.json"], "'--scorer'",
         files={"bad.json": "{}"}),
    Case("an unknown command", ["reprot"], "No such command 'reprot'. Did you mean `vigil report`?"),
    Case("an unknown subcommand", ["alerts", "chek"], "No such command 'chek'. Did you mean `vigil alerts check`?"),
    Case("report over a negative number of hours", ["report", "--hours", "-5"], "'--hours': -5.0 is not in the range x>0"),
    Case("an option that takes a number given a word", ["report", "--hours", "many"], "'--hours'"),
    Case("alerts check with a config of broken YAML", ["alerts", "check", "--config", "{tmp}/broken.yaml"],
         "not valid YAML", files={"broken.yaml": BROKEN_YAML}),
    Case("show of a trace the store does not hold", ["show", "0123456789abcdef"], "no turn with trace id"),
    Case("demo in a VIGIL_HOME holding a store the demo did not make", ["demo"], "a store the demo did not make"),
    Case("show with too short a trace id", ["show", "abc"], "give at least 6 characters of the trace id"),
    Case("report --dsn with a scheme vigil cannot open", ["report", "--dsn", f"mysql://root:{SECRET}@db/x"],
         "--dsn=mysql://root:***@db/x is not a store vigil can open"),
    Case("alerts check with a config whose rule is incomplete", ["alerts", "check", "--config", "{tmp}/rule.yaml"],
         "alerts.0: Value error, alert 'x': kind 'threshold' needs a threshold",
         files={"rule.yaml": "alerts: [{name: x, kind: threshold}]\n"}),
    Case("intake on a port another process listens on", ["intake", "--port", "{busy}"], "address already in use",
         {"REDIS_URL": "{redis}"}),
    Case("feedback import of a file that does not exist", ["feedback", "import", "{tmp}/none.jsonl"],
         "does not exist"),
]


def _fill(text: str, tmp: str, port: int, redis: str) -> str:
    return text.replace("{tmp}", tmp).replace("{port}", str(port)).replace("{redis}", redis)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_cli_mistake_is_one_line_on_stderr_with_a_nonzero_exit_and_no_traceback_or_password(
        case, tmp_path, redis_url):
    tmp, port = str(tmp_path), _closed_port()
    for name, text in case.files.items():
        (tmp_path / name).write_text(_fill(text, tmp, port, redis_url), encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if k not in ("CLICKHOUSE_DSN", "REDIS_URL", "VIGIL_CONFIG", "VIGIL_DEBUG", "VIGIL_JUDGE_BASE_URL")}
    env.update({"VIGIL_HOME": str(tmp_path / "home"), "COLUMNS": "200"})
    env.update({k: _fill(v, tmp, port, redis_url) for k, v in case.env.items()})
    if case.args[0] in ("show", "demo"):  # a migrated, empty store
        migrated_home(tmp_path / "home")

    with socket.socket() as busy:  # a port another process listens on
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        args = [_fill(a, tmp, port, redis_url).replace("{busy}", str(busy.getsockname()[1])) for a in case.args]
        run = subprocess.run([sys.executable, "-m", "vigil.worker", *args], env=env, capture_output=True, text=True,
                             timeout=120, check=False)

    lines = run.stderr.strip().splitlines()
    assert run.returncode != 0, run.stdout + run.stderr
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("vigil: error: "), lines[0]
    assert _fill(case.says, tmp, port, redis_url) in lines[0]
    assert "Traceback" not in run.stdout + run.stderr
    assert SECRET not in run.stdout + run.stderr


def test_the_scores_json_stays_alone_on_stdout_so_it_pipes_into_jq(tmp_path):
    trace = tmp_path / "turn.json"
    trace.write_text(json.dumps({"trace_id": "t1", "project": "p", "agent": "a", "output": "Hello.",
                                 "input": [{"role": "user", "content": "Hi?"}]}), encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "vigil.worker", "score", "--scorer", "answer_relevancy", "--trace",
                          str(trace), "--judge-base-url", f"http://127.0.0.1:{_closed_port()}/v1", "--model", "m",
                          "--timeout", "1"], check=False, capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert json.loads(run.stdout)["status"] == "failed"


def test_debug_shows_the_traceback(tmp_path):
    env = {**os.environ, "VIGIL_HOME": str(tmp_path)}
    env.pop("CLICKHOUSE_DSN", None)
    run = subprocess.run([sys.executable, "-m", "vigil.worker", "--debug", "report"], env=env, capture_output=True, check=False,
                         text=True, timeout=120)
    assert run.returncode != 0
    assert "Traceback" in run.stderr and "StoreError: the store has no vigil tables yet" in run.stderr


def test_version_prints_the_installed_version():
    from importlib.metadata import version

    run = subprocess.run([sys.executable, "-m", "vigil.worker", "--version"], check=False, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == f"vigil {version('vigil')}"


@pytest.mark.parametrize("command", [[], ["report"], ["score"], ["config", "check"], ["judge"], ["worker"]])
def test_help_shows_examples(command):
    run = subprocess.run([sys.executable, "-m", "vigil.worker", *command, "--help"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert run.returncode == 0
    assert "Examples:" in run.stdout and "vigil " in run.stdout.split("Examples:")[1]


def test_a_url_password_is_hidden_wherever_it_appears():
    from vigil.worker.cli.errors import redact

    assert redact("cannot reach redis://:secret@host:6379/0 now") == "cannot reach redis://***@host:6379/0 now"
    assert redact("http://default:pw@ch:8123 and https://tok@api") == "http://default:***@ch:8123 and https://***@api"
    assert redact("http://host:8123/path") == "http://host:8123/path"
