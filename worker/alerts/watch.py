"""The sequential rules' reading and writing: each monitor's saved state, the scores stored since the last check, one
step of the detector, and the check's row in ``detector_checks``.

A monitor's state is the latest ``detector_checks`` row's, so a restarted beat or writer resumes where it stopped;
a monitor with no row (its first check, or a store whose rows expired) is rebuilt by replaying its stored history
(``baseline_minutes`` back) through the same checks. So is a monitor whose latest row is spoiled (a state that does not
read, times after now): the row is set aside with one log line and the check writes a sound one; rows dated after
now are never read, and every other monitor and rule is checked as usual. New scores are the ones ClickHouse stored (``inserted_at``)
after the previous check's; a score for a turn more than an hour older than the newest one the detector has seen
is a backfill (``vigil replay`` of old turns, a judge's backlog) and is not fed to it, so it cannot page. Only the
monitor's current scorer version is watched: a new version starts a new baseline.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from weakref import WeakKeyDictionary

import numpy as np
import structlog
from clickhouse_connect.driver.client import Client
from clickhouse_connect.driver.insert import InsertContext
from vigil.schemas import AlertRule
from vigil.worker.alerts.decide import sequential_verdict
from vigil.worker.alerts.model import Subject, Verdict
from vigil.worker.alerts.replay import checks, params_for
from vigil.worker.alerts.segments import SEGMENT_QUERY, Blame, blame_rows
from vigil.worker.alerts.sequential import STALE_S, Decision, DetectorState, step

__all__ = ["CHECK_COLUMNS", "SKEW_S", "Watched", "segments", "watch"]

log = structlog.get_logger("vigil.alerts")

CHECK_COLUMNS = ("checked_at", "rule", "monitor", "scorer_version", "mode", "firing", "statistic", "threshold",
                 "scores", "baseline_mean", "recent_mean", "since", "drop", "drop_low", "drop_high", "reason",
                 "cursor", "state")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# A row dated after now (+ SKEW_S, for clocks a little apart) is never a monitor's state: it would stay the latest.
SKEW_S = 300
# Per monitor, in one pass: its latest row up to now (+ SKEW_S), the state, and whether it has rows after that, and the
# latest one's time (never read; they are later than the week's start, so the week's rows hold them all).
_STATES = """
WITH {now:DateTime64(3)} + INTERVAL %d SECOND AS latest
SELECT monitor, countIf(checked_at <= latest), argMaxIf(scorer_version, checked_at, checked_at <= latest),
       argMaxIf(cursor, checked_at, checked_at <= latest), argMaxIf(state, checked_at, checked_at <= latest),
       countIf(checked_at > latest), maxIf(checked_at, checked_at > latest)
FROM detector_checks
WHERE rule = {rule:String} AND checked_at >= {now:DateTime64(3)} - INTERVAL 7 DAY
GROUP BY monitor""" % SKEW_S

_MONITORS = """
SELECT DISTINCT monitor FROM scores_1h
WHERE bucket >= toStartOfHour({now:DateTime64(3)} - INTERVAL {minutes:UInt32} MINUTE) AND monitor != ''"""

_SCORES = """
SELECT monitor, scorer_version, toUnixTimestamp64Milli(trace_time) / 1000 AS at,
       score / if(scale > 0, scale, 1) AS x, inserted_at, score_id
FROM scores
WHERE status = 'scored' AND score IS NOT NULL AND label != 'abstained' AND monitor IN {monitors:Array(String)}
  AND {where}
ORDER BY at"""

# Stored since the last check, for turns no older than the backfill limit (which also spares a scan of the table).
_NEW = "inserted_at > {cursor:DateTime64(3)} AND trace_time >= {oldest:DateTime64(3)}"
_HISTORY = ("trace_time >= {now:DateTime64(3)} - INTERVAL {minutes:UInt32} MINUTE "
            "AND trace_time <= {now:DateTime64(3)}")


@dataclass
class Watched:
    """One monitor after a check: its verdict, and what the check row records."""

    subject: Subject
    verdict: Verdict
    decision: Decision
    version: str


@dataclass
class _Saved:
    version: str
    cursor: datetime
    state: DetectorState


# Each client's insert into detector_checks, its column types read once (a DESCRIBE per check otherwise).
_inserts: WeakKeyDictionary[Client, InsertContext] = WeakKeyDictionary()

_said: set[tuple[str, str, str]] = set()  # (rule, monitor, why) already logged by this process


def _set_aside(rule: AlertRule, monitor: str, why: str, then: str) -> None:
    if (rule.name, monitor, why) not in _said:
        _said.add((rule.name, monitor, why))
        log.warning("detector state set aside", rule=rule.name, monitor=monitor, why=why, then=then)


def _sound(row: tuple, now: datetime) -> _Saved | str:
    """A saved state, or why it cannot be one: a state that does not read, or a time after now."""
    _, version, cursor, text = row
    try:
        state = DetectorState.model_validate_json(text)
    except ValueError as exc:
        return f"its state does not read as a detector state: {str(exc).splitlines()[0][:200]}"
    cursor = cursor.replace(tzinfo=UTC) if cursor.tzinfo is None else cursor
    latest = now.timestamp() + SKEW_S
    if (state.last_score_at or 0) > latest or (state.fired_at or 0) > latest:  # the cursor is the store's clock
        return "its state is dated after now"
    return _Saved(version=version, cursor=cursor, state=state)


def _saved(client: Client, rule: AlertRule, now: datetime) -> dict[str, _Saved]:
    """Each monitor's latest state; a row that cannot be one is set aside (one log line), so that monitor is rebuilt
    from its history and the check writes a sound row in its place. Rows dated after now are never read."""
    rows = client.query(_STATES, parameters={"rule": rule.name, "now": now}).result_rows
    for monitor, *_, ahead, at in rows:
        if ahead:
            _set_aside(rule, monitor, f"a check row is dated {at:%Y-%m-%d %H:%M} UTC, after now",
                       "never read: the latest row before now is the state, or the stored scores rebuild it")
    saved = {}
    for monitor, before, version, cursor, text, *_ in rows:
        if not before:
            continue
        sound = _sound((monitor, version, cursor, text), now)
        if isinstance(sound, str):
            _set_aside(rule, monitor, sound, "rebuilt from the stored scores; this check's row replaces it")
        else:
            saved[monitor] = sound
    return saved


def _rows(client: Client, where: str, **parameters) -> list[tuple]:
    sql = _SCORES.replace("{where}", where)
    return client.query(sql, parameters=parameters).result_rows


def _latest_version(rows: list[tuple]) -> str:
    return rows[-1][1] if rows else ""


def _arrays(rows: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    seen: set[str] = set()
    kept = [(r[2], r[3]) for r in rows if not (r[5] in seen or seen.add(r[5]))]  # a redelivered score once
    kept.sort()
    return np.asarray([k[0] for k in kept], dtype=float), np.asarray([k[1] for k in kept], dtype=float)


def _cursor(rows: list[tuple], default: datetime) -> datetime:
    newest = max((r[4] for r in rows), default=None)
    if newest is None:
        return default
    return newest.replace(tzinfo=UTC) if newest.tzinfo is None else newest


def _rebuild(client: Client, rule: AlertRule, monitor: str, now: datetime) -> tuple[_Saved, Decision | None]:
    """A state from the stored history, replayed at the live cadence up to ``now``."""
    rows = _rows(client, _HISTORY, monitors=[monitor], now=now, minutes=rule.baseline_minutes)
    version = _latest_version(rows)
    rows = [r for r in rows if r[1] == version]
    ts, xs = _arrays(rows)
    state, decision = DetectorState(), None
    for _, after, decision in checks(DetectorState(), ts, xs, params_for(rule), end=now.timestamp()):
        state = after
    return _Saved(version=version, cursor=_cursor(rows, EPOCH), state=state), decision


def _advance(saved: _Saved, rows: list[tuple], rule: AlertRule, now: datetime) -> tuple[_Saved, Decision]:
    """One live step over the rows stored since the saved cursor."""
    cursor = _cursor(rows, saved.cursor)
    version = _latest_version(rows) or saved.version
    state = saved.state if version == saved.version else DetectorState()  # a new scorer version: a new baseline
    newest = state.last_score_at
    fresh = [r for r in rows if r[1] == version and (newest is None or r[2] >= newest - STALE_S)]
    ts, xs = _arrays(fresh)
    state, decision = step(state, ts, xs, now.timestamp(), params_for(rule))
    return _Saved(version=version, cursor=cursor, state=state), decision


def watch(client: Client, rule: AlertRule, now: datetime) -> list[Watched]:
    """One check of a sequential regression rule over every monitor it covers; writes each monitor's check row."""
    saved = _saved(client, rule, now)
    if rule.monitor in saved:  # a rule on one monitor with a saved state: no need to look for monitors with scores
        monitors = [rule.monitor]
    else:
        found = {r[0] for r in client.query(_MONITORS, parameters={"now": now, "minutes": rule.baseline_minutes})
                 .result_rows}
        monitors = sorted((found | set(saved)) if rule.monitor is None else {rule.monitor} & (found | set(saved)))
    decisions: dict[str, tuple[_Saved, Decision]] = {}
    known = [m for m in monitors if m in saved]
    if known:
        cursor = min(saved[m].cursor for m in known)
        newest = [saved[m].state.last_score_at for m in known]
        oldest = min((t for t in newest if t is not None), default=now.timestamp()) - STALE_S
        new_rows = _rows(client, _NEW, monitors=known, cursor=cursor, oldest=datetime.fromtimestamp(oldest, UTC))
        for m in known:
            mine = [r for r in new_rows if r[0] == m and _cursor([r], EPOCH) > saved[m].cursor]
            decisions[m] = _advance(saved[m], mine, rule, now)
    for m in monitors:
        if m not in saved:
            rebuilt, decision = _rebuild(client, rule, m, now)
            if decision is None:
                rebuilt, decision = _advance(rebuilt, [], rule, now)
            decisions[m] = (rebuilt, decision)
    out, rows = [], []
    for m in monitors:
        kept, decision = decisions[m]
        subject = Subject(monitor=m)
        out.append(Watched(subject=subject, verdict=sequential_verdict(subject, decision), decision=decision,
                           version=kept.version))
        rows.append(_check_row(rule, m, now, kept, decision))
    if rows:
        context = _inserts.get(client)
        if context is None:
            context = _inserts[client] = client.create_insert_context("detector_checks", list(CHECK_COLUMNS))
        context.data = rows
        client.insert(context=context)
    return out


def _at(epoch: float | None) -> datetime | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC)


def _check_row(rule: AlertRule, monitor: str, now: datetime, saved: _Saved, d: Decision) -> list:
    return [now, rule.name, monitor, saved.version, d.mode, int(d.breach is True), d.statistic, 1.0, d.scored,
            d.baseline_mean, d.recent_mean, _at(d.since), d.drop, d.drop_low, d.drop_high, d.reason, saved.cursor,
            saved.state.model_dump_json()]


def segments(client: Client, monitor: str, version: str, since: datetime, until: datetime) -> Blame:
    """The ranked segments and the agents of ``monitor``'s drop from ``since`` to ``until`` against the day
    before it."""
    rows = client.query(SEGMENT_QUERY, parameters={"monitor": monitor, "version": version, "since": since,
                                                   "until": until}).result_rows
    return blame_rows(rows)

