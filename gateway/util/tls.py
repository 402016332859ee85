"""The process's one TLS client context, for every HTTPS client kith makes.

httpx builds a new verifying context for each client it creates, and loading the CA bundle into it
costs ~25 ms of CPU: a Telegram adapter makes two clients at each start and restart, a model
provider one. One context, made on first use, serves them all (a context is safe to share between
clients and threads). It trusts what httpx would: certifi's bundle, or ``SSL_CERT_FILE`` /
``SSL_CERT_DIR`` when set.
"""

from __future__ import annotations

import functools
import ssl


@functools.cache
def client_context() -> ssl.SSLContext:
    import httpx

    return httpx.create_ssl_context(trust_env=True)
