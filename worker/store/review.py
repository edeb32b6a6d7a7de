"""The review page's SQL (``vigil review``): its queues, the labels it reads back, one item's session, the export.

Every query is bound server-side (``{monitor:String}``, ``{reviewer:String}``, ``{limit:UInt32}``,
``{trace_id:String}``, ``{projects:Array(String)}``), passed with clickhouse-connect's ``parameters=``, so no name or
id is ever spliced into SQL. ``projects`` is the reviewer's (empty: every project): the queues, the monitors and the
progress read only their turns.

A monitor's *population* is its scored turns (a score, not an abstention), one per project's trace: the judge's side of a
turn is its latest score / scale (``judged``), positive at the row's pass line (``schemas.pass_line``) and above; a
person's side is cut at the line of what it judges (a reviewer's label: the monitor's; a user's: 0.5). A *review label* is a ``feedback`` row with
``source = 'reviewer'`` and the monitor it is about; ``queue`` says how the page chose the item.
"""

from __future__ import annotations

from vigil.schemas.pass_line import sql_human_line, sql_passes
from vigil.worker.store.queries import Query

__all__ = ["REVIEW_QUERIES"]

# ``scores.project``: the column (the population's own is named ``project`` too)
_IN_PROJECTS = "(empty({projects:Array(String)}) OR has({projects:Array(String)}, scores.project))"

_POPULATION = """
    SELECT trace_id, argMax(score / if(scale > 0, scale, 1), scored_at) AS judged,
           argMax(pass_line, scored_at) AS line,
           project, any(agent) AS agent, max(trace_time) AS last_time
    FROM scores FINAL
    WHERE monitor = {monitor:String} AND status = 'scored' AND score IS NOT NULL AND label != 'abstained'
      AND """ + _IN_PROJECTS + """
    GROUP BY project, trace_id"""

_REVIEWED = """
    SELECT project, trace_id FROM feedback FINAL WHERE source = 'reviewer' AND monitor = {monitor:String}"""

_MINE = _REVIEWED + " AND author = {reviewer:String}"


def _not_in(labels: str, project: str = "project", trace_id: str = "trace_id") -> str:
    """The turn (``project``, ``trace_id``) has none of ``labels`` (project, trace_id): a label is of its own
    project's turn, an older label that names no project of every project's turn of its trace id."""
    return f"({project}, {trace_id}) NOT IN ({labels}) AND ('', {trace_id}) NOT IN ({labels})"


_UNREVIEWED = _not_in(_REVIEWED)

# Feedback that is about this monitor: a reviewer's label of it, or a user's feedback on the whole turn.
_ABOUT = """
    SELECT project, trace_id, source, author, monitor, value, scale, created_at
    FROM feedback FINAL
    WHERE monitor IN ('', {monitor:String})"""
# Feedback that names its project pairs only with that project's turn (trace ids are a project's own); older rows
# with no project pair by the trace id alone.
_SAME_PROJECT = "f.project IN ('', p.project)"
_JUDGE_POSITIVE = sql_passes("p.judged", "1", "p.line")
_HUMAN_POSITIVE = sql_passes("f.value", "f.scale", sql_human_line("f.monitor", "p.line"))

MAX_OPINIONS = 2  # a flagged turn goes to at most this many reviewers
_OPINED = f"SELECT project, trace_id FROM ({_REVIEWED}) GROUP BY project, trace_id HAVING count() >= {MAX_OPINIONS}"

# Each queue lists turns as (project, trace id): a trace id is its project's own.
_QUEUE_LIST = [
    Query("random", "A uniform random sample of the monitor's unreviewed scored turns", "lookup", f"""
SELECT project, trace_id FROM ({_POPULATION})
WHERE {_UNREVIEWED}
ORDER BY rand()
LIMIT {{limit:UInt32}}""", ("project", "trace_id")),
    Query("lowest", "The monitor's unreviewed turns, lowest score first", "lookup", f"""
SELECT project, trace_id FROM ({_POPULATION})
WHERE {_UNREVIEWED}
ORDER BY judged, last_time DESC, project, trace_id
LIMIT {{limit:UInt32}}""", ("project", "trace_id")),
    Query("flagged", "Turns with negative user feedback, or feedback the judge disagrees with", "lookup", f"""
SELECT p.project AS project, f.trace_id AS trace_id
FROM ({_ABOUT}) AS f
INNER JOIN ({_POPULATION}) AS p ON p.trace_id = f.trace_id
WHERE {_SAME_PROJECT} AND ((f.source = 'user' AND NOT {_HUMAN_POSITIVE}) OR {_HUMAN_POSITIVE} != {_JUDGE_POSITIVE})
  AND {_not_in(_MINE, "p.project", "f.trace_id")}
  AND {_not_in(_OPINED, "p.project", "f.trace_id")}
GROUP BY p.project, f.trace_id
ORDER BY max(f.created_at) DESC, p.project, f.trace_id
LIMIT {{limit:UInt32}}""", ("project", "trace_id")),
    Query("alerts", "The worst turns of the newest alerts on the monitor", "lookup", f"""
SELECT p.project AS project, p.trace_id AS trace_id
FROM ({_POPULATION}) AS p
INNER JOIN (
    SELECT project, agent, fired_at, updated_at
    FROM alerts FINAL
    WHERE monitor = {{monitor:String}} AND kind IN ('regression', 'threshold', 'agreement') AND state = 'firing'
    ORDER BY fired_at DESC
    LIMIT 3
) AS a ON a.project = p.project
WHERE (a.agent = '' OR a.agent = p.agent)
  AND p.last_time >= a.fired_at - INTERVAL 1 HOUR AND p.last_time <= a.updated_at
  AND {_not_in(_REVIEWED, "p.project", "p.trace_id")}
GROUP BY p.project, p.trace_id
ORDER BY max(a.fired_at) DESC, min(p.judged), p.project, p.trace_id
LIMIT {{limit:UInt32}}""", ("project", "trace_id")),
]

REVIEW_QUERIES: dict[str, Query] = {q.name: q for q in [
    *_QUEUE_LIST,
    Query("monitors", "Monitors with scored turns, and their scale", "lookup", """
SELECT monitor, argMax(scale, scored_at) AS latest_scale, uniqExact(trace_id) AS turns
FROM scores FINAL
WHERE status = 'scored' AND score IS NOT NULL AND label != 'abstained' AND """ + _IN_PROJECTS + """
GROUP BY monitor
ORDER BY monitor""", ("monitor", "scale", "turns")),
    Query("queue_sizes", "How many turns each of the monitor's queues holds", "lookup", f"""
SELECT
    (SELECT count() FROM ({_POPULATION})) AS population,
    (SELECT count() FROM ({_POPULATION}) WHERE NOT ({_UNREVIEWED})) AS reviewed,
    (SELECT count() FROM ({_POPULATION}) WHERE {_UNREVIEWED}) AS unreviewed""",
          ("population", "reviewed", "unreviewed")),
    Query("labels", "The monitor's review labels with the judge's side of each turn", "lookup", f"""
SELECT f.trace_id AS trace_id, f.queue AS queue, f.author AS author, {_HUMAN_POSITIVE} AS human_positive,
       {_JUDGE_POSITIVE} AS judge_positive, f.created_at AS created_at
FROM (SELECT project, trace_id, queue, author, monitor, value, scale, created_at FROM feedback FINAL
      WHERE source = 'reviewer' AND monitor = {{monitor:String}}) AS f
INNER JOIN ({_POPULATION}) AS p ON p.trace_id = f.trace_id
WHERE {_SAME_PROJECT}
ORDER BY f.trace_id, f.created_at""",
          ("trace_id", "queue", "author", "human_positive", "judge_positive", "created_at")),
    Query("item_labels", "Every piece of feedback on a turn", "lookup", """
SELECT monitor, source, author, name, value, scale, comment, queue, created_at
FROM feedback FINAL
WHERE trace_id = {trace_id:String} AND project IN ('', {project:String})
ORDER BY created_at""",
          ("monitor", "source", "author", "name", "value", "scale", "comment", "queue", "created_at")),
    Query("session_before", "The turns of the same session before this one (the latest ten)", "lookup", """
SELECT trace_id, started_at, question, output
FROM traces FINAL
WHERE session_id != '' AND session_id = {session_id:String} AND project = {project:String}
  AND started_at < {started_at:DateTime64(3, 'UTC')}
ORDER BY started_at DESC
LIMIT 10""", ("trace_id", "started_at", "question", "output")),
    Query("export", "The monitor's review labels, one row per label, with the turn's project and trace id", "lookup",
          """
SELECT project, trace_id, author, value / if(scale > 0, scale, 1) AS human, comment, queue
FROM feedback FINAL
WHERE source = 'reviewer' AND monitor = {monitor:String}
ORDER BY trace_id, project, author""", ("project", "trace_id", "author", "human", "comment", "queue")),
]}
