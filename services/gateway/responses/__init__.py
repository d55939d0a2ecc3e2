"""OpenAI's Responses API (``/v1/responses``) on top of the chat pipeline.

A Responses request is converted into the gateway's chat request (``convert``) and runs
through the same planning, dispatch and job store as ``/v1/chat/completions``; only the
request shape (``request``), the reply shape (``objects``, ``render``), the conversation store
for ``previous_response_id`` (``store``), the typed SSE events (``stream``) and the lifecycle
(``service``) are its own.
"""
