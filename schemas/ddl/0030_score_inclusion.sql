-- vigil 0030: each score's inclusion probability, the rate its turn was sampled at (the configured rate, paced down
-- by a judge budget, times what load shedding admitted). Means over a period whose rate changed weigh each score by
-- 1 / inclusion (vigil.worker.pipeline.budget). Rows from before: 1, as every row had the same weight.
ALTER TABLE scores ADD COLUMN IF NOT EXISTS inclusion Float64 DEFAULT 1;
