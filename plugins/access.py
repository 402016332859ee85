"""Built-in access plugin: applies ``gateway.access.AccessPolicy`` in ``gateway_check_access``.

One policy (and one SQLite connection) per running gateway, created at startup and closed at shutdown;
keyed weakly by the gateway so several gateways in one process (tests) never share state.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING

from gateway.access import AccessPolicy, AccessStore
from gateway.hookspecs import hookimpl
from gateway.types import AccessDecision, Drop, InboundMessage

if TYPE_CHECKING:
    from gateway.app import Gateway

log = logging.getLogger("kith.access")

_policies: weakref.WeakKeyDictionary[Gateway, AccessPolicy] = weakref.WeakKeyDictionary()


def policy_for(gateway: Gateway) -> AccessPolicy:
    policy = _policies.get(gateway)
    if policy is None:
        policy = _policies[gateway] = AccessPolicy(gateway.config, AccessStore.for_config(gateway.config))
    return policy


@hookimpl
def gateway_startup(gateway: Gateway) -> None:
    policy_for(gateway)  # create the tables before the first message, and fail early if we cannot


@hookimpl
def gateway_shutdown(gateway: Gateway) -> None:
    policy = _policies.pop(gateway, None)
    if policy is not None:
        policy.store.close()


@hookimpl
def gateway_check_access(gateway: Gateway, message: InboundMessage) -> AccessDecision | Drop | None:
    decision = policy_for(gateway).check(message)
    if isinstance(decision, Drop):
        # Account ids are not secrets, but message text never goes to this log line.
        log.info("access: %s:%s dropped: %s", message.channel, message.account_id, decision.reason)
    return decision
