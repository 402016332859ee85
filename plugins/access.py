"""Built-in access plugin: applies ``gateway.turn.admission.AccessPolicy`` in ``gateway_check_access``.

One policy (on the gateway's state) per running gateway, created at startup and closed at shutdown;
kept in the gateway's stash so several gateways in one process (tests) never share state.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from gateway.hookspecs import hookimpl
from gateway.turn.admission import AccessPolicy, AccessStore
from gateway.types import AccessDecision, Drop, InboundMessage, StashKey

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.access")

POLICY: StashKey[AccessPolicy] = StashKey()


def policy_for(gateway: Services) -> AccessPolicy:
    policy = gateway.stash.get(POLICY)
    if policy is None:
        policy = gateway.stash[POLICY] = AccessPolicy(gateway.config, AccessStore(gateway.state))
    return policy


@hookimpl
def gateway_startup(gateway: Services) -> None:
    policy_for(gateway)  # create the tables before the first message, and fail early if we cannot


@hookimpl
def gateway_shutdown(gateway: Services) -> None:
    policy = gateway.stash.pop(POLICY)
    if policy is not None:
        policy.store.close()


_PRESSURE = {"pairing queue full", "pairing code quota used"}
_WARN_EVERY = timedelta(minutes=10)
PRESSURE_WARNED: StashKey[dict[str, datetime]] = StashKey()  # channel -> last warning, per gateway


@hookimpl
def gateway_check_access(gateway: Services, message: InboundMessage) -> AccessDecision | Drop | None:
    decision = policy_for(gateway).check(message)
    if isinstance(decision, Drop):
        # Account ids are not secrets, but message text never goes to this log line.
        log.info("access: %s:%s dropped: %s", message.channel, message.account_id, decision.reason)
        if decision.reason in _PRESSURE:
            _warn_pressure(gateway, message.channel, decision.reason)
    return decision


def _warn_pressure(gateway: Services, channel: str, reason: str) -> None:
    """Tell the owner once per interval that strangers are being turned away (a flood, or bad luck)."""
    now = datetime.now(UTC)
    warned = gateway.stash.setdefault(PRESSURE_WARNED, {})
    last = warned.get(channel)
    if last is not None and now - last < _WARN_EVERY:
        return
    warned[channel] = now
    log.warning(
        "access: the pairing queue on %s is turning strangers away (%s). `kith pairing list` shows the "
        "counts; people you know can skip the queue with an invite (`kith pairing invite`).",
        channel,
        reason,
    )
