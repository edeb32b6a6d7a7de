-- vigil 0032: each score row carries its monitor's pass line (`pass_at` in the config, as a share of the scale:
-- schemas/pass_line.py), so agreement, the review page, the report and the alerts read "passes" from the row as
-- `score / scale >= pass_line`. Earlier rows keep the line every monitor had before: 0.5.

ALTER TABLE scores ADD COLUMN IF NOT EXISTS pass_line Float64 DEFAULT 0.5 AFTER scale
