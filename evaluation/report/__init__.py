"""Stage 7, report: the load test's per-request records and the cost-versus-accuracy tables, Pareto
charts and self-contained HTML page made from them (priced by ``TTC_EVAL_*`` settings), and the
cost-vs-accuracy frontier per task kind that the development ladder is drawn against."""
