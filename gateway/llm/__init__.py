"""Language-model providers by role (``main``, ``cheap``): Anthropic (default), OpenAI-compatible, echo (dev, bench).

``base`` is the provider interface and errors, ``provider`` builds providers from config and holds the
default ``gateway_llm_call``, ``routed`` is the model handle every call goes through, and each backend
has its own module. It may import ``gateway.types``, ``gateway.config``, ``gateway.context`` and
``gateway.hookspecs`` (the default ``gateway_llm_call`` is a hook); never ``memory``, ``state``,
adapters or plugins.
"""
