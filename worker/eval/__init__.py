"""``vigil eval``: how often a judge agrees with people. Loaders per dataset format (``items``), the statistics as
pure functions (``stats``), the runner through the real scorer and judge stack (``runner``), the tables (``show``)
and the kept runs (``keep``, the ``judge_evals`` table)."""
