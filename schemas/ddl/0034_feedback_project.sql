-- vigil 0034: feedback names its trace's project (a trace id is its project's own: the same id in two projects is two
-- traces), so agreement pairs a score with feedback of its own project. '' (earlier rows, senders that do not say)
-- pairs by the trace id alone, as before.

ALTER TABLE feedback ADD COLUMN IF NOT EXISTS project LowCardinality(String) DEFAULT '' AFTER feedback_id
