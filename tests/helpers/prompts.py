"""Prompts e2e tests send for their effect on decoding, not for an answer."""

# A raw counting prompt: greedy decoding continues the sequence instead of ending it, so a
# request with it decodes for all of its max_tokens (deadline, abort and kv-cache tests).
COUNTING_PROMPT = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,"
