-- vigil 0009: the prompt tokens of each judge call that the provider served from its prefix cache
-- (usage.prompt_tokens_details.cached_tokens), so the cached share of the judge's prompt tokens can be reported.
ALTER TABLE judge_calls ADD COLUMN IF NOT EXISTS cached_prompt_tokens UInt32 DEFAULT 0 AFTER completion_tokens;
