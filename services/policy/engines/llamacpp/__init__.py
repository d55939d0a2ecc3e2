"""The embedded llama.cpp engine, one module per job; the engine registry loads ``engine.py``.

``engine.py`` (the ``Engine``: model, context, rendering, tokens), ``batch.py`` (the
continuous-batching decode loop), ``tasks.py`` (one request in the loop: a generation or a
scoring), ``protocol.py`` (what a request uses of the loop, the vocabulary and its sampler),
``grammar.py`` (per-candidate sampler chains and grammars), ``slots.py`` (KV-cell and
sequence bookkeeping) and ``sampling.py`` (log-softmax, top-k, stop strings).

Nothing is imported here: importing the package loads no llama.cpp library.
"""
