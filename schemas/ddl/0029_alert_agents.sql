-- vigil 0029: the agents an alert is about. A sequential regression watches a monitor over every agent it covers;
-- the agents whose scores pulled its mean down are named here (largest first), so the alert's sentence says them
-- and the report marks only their charts. Empty for an alert whose subject names its agent (or a judge).
ALTER TABLE alerts ADD COLUMN IF NOT EXISTS agents Array(String) DEFAULT [];
