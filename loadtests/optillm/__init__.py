"""OptiLLM side by side with our efforts (issue 21 item 7): ``loadtests/optillm_compare.py``."""
