"""Stage 2, pools: every candidate drawn for a problem once (greedy and sampled chains of
thought, programs, code completions) with the calls that produced them, stored in chunks that
are written whole and read newest-first, so any configuration can be priced offline from them;
and the provenance (code revision, model hash, machine load) every raw result carries."""
