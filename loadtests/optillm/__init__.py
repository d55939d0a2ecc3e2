"""OptiLLM side by side with our efforts, on the same engine: ``loadtests/optillm_compare.py``."""
