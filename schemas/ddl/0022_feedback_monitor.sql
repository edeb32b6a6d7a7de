-- vigil 0022: a reviewer's label (`vigil review`) is about one monitor's verdict, and the page says how it chose the
-- turn. `monitor` = '' is feedback on the whole turn (a user's thumbs), which pairs with every monitor's score;
-- `queue` ('' unless the review page chose the turn: random, lowest, flagged, alerts) weighs the agreement estimate.
-- Both default to '' so earlier rows and earlier writers keep their meaning.

ALTER TABLE feedback ADD COLUMN IF NOT EXISTS monitor LowCardinality(String) DEFAULT '' AFTER author;
ALTER TABLE feedback ADD COLUMN IF NOT EXISTS queue LowCardinality(String) DEFAULT '' AFTER monitor
