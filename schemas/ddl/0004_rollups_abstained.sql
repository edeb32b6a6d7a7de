-- vigil 0004: abstentions have their own count in the rollups. An abstention (the agent said it is not sure) is a
-- scored row labelled 'abstained' with no score: `abstained` counts it, `scored` no longer does, and it never
-- enters `mean`, `variance` or `quantiles` (score IS NULL). The views are redefined, once for both rollups
-- ({rollup}: worker.store.migrations.ROLLUPS). Run it while no writer inserts (`vigil migrate` before the
-- workers start): scores inserted between a view's drop and its creation would miss the rollups.

ALTER TABLE scores_{rollup} ADD COLUMN IF NOT EXISTS abstained AggregateFunction(countIf, UInt8) AFTER scored;

DROP VIEW IF EXISTS scores_{rollup}_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS scores_{rollup}_mv TO scores_{rollup} AS
SELECT
    {bucket}(trace_time) AS bucket,
    project, agent, monitor, scorer, scorer_version,
    countState() AS rows,
    countIfState(status = 'scored' AND label != 'abstained') AS scored,
    countIfState(status = 'scored' AND label = 'abstained') AS abstained,
    countIfState(status = 'unscored') AS unscored,
    countIfState(status = 'failed') AS failed,
    avgIfState(ifNull(score, 0) / if(scale > 0, scale, 1), status = 'scored' AND score IS NOT NULL) AS mean,
    varSampIfState(ifNull(score, 0) / if(scale > 0, scale, 1), status = 'scored' AND score IS NOT NULL) AS variance,
    quantilesTDigestIfState(0.1, 0.5, 0.9)(ifNull(score, 0) / if(scale > 0, scale, 1),
                                            status = 'scored' AND score IS NOT NULL) AS quantiles,
    sumState(toUInt64(judge_calls)) AS judge_calls,
    sumState(toUInt64(prompt_tokens)) AS prompt_tokens,
    sumState(toUInt64(completion_tokens)) AS completion_tokens,
    sumState(cost_usd) AS cost_usd,
    quantilesTDigestState(0.5, 0.95)(toFloat64(greatest(dateDiff('millisecond', trace_time, scored_at), 0)) / 1000)
        AS lag_seconds
FROM scores
GROUP BY bucket, project, agent, monitor, scorer, scorer_version
