"""Stage 3, pricing: each configuration's expected accuracy, tokens and latency on a problem,
replayed from the problem's pool over its ``n``-subsets (sample once, price many); pricing tables
per task kind with bootstrap intervals; the cascade onto a larger model priced from both models'
pools; and the live side: the pinned gateway request that runs a priced configuration, the
records a live run keeps, and the tree strategies a pool cannot price, measured live."""
