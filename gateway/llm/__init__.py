"""Language-model providers by role (``main``, ``cheap``, ``vision``, ``transcription``, any configured name):
Anthropic (default), OpenAI-compatible (``openai``), echo (dev, bench).

``base`` is the provider interface and errors, ``provider`` builds providers from config and holds the
default ``gateway_llm_call``, ``routed`` is the model handle every call goes through, ``usage`` records
tokens and cost and enforces the daily budget (through ``gateway.state``, never importing it), each
backend has its own module, and ``tool_loop`` is the tool loop the API backends share. It may import
``gateway.types``, ``gateway.config``, ``gateway.turn.budget`` and ``gateway.hookspecs`` (the default
``gateway_llm_call`` is a hook); never ``memory``, ``state``, adapters or plugins.
"""
