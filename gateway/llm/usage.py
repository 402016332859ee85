"""Token use and cost per person, role and UTC day, and the per-person daily budget (docs/models.md).

Every call answered by a configured provider through the default ``gateway_llm_call`` is recorded
(a plugin answering the hook itself spent nothing kith can price). Cost comes from the role's
``prices``; Anthropic reports cache reads and writes apart from ``input_tokens``, priced at 0.1x and
1.25x the input price as Anthropic bills them (OpenAI-compatible servers count cached tokens inside
``prompt_tokens``). The budget stops background jobs, never a person's chat turn: a turn is someone
waiting for an answer, a nightly job is not.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from gateway.config import Prices
from gateway.llm.base import LLMError
from gateway.ops.metrics import observe_llm
from gateway.types import LLMRequest, LLMResponse, StashKey, Turn

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("kith.llm.usage")

BUDGET_WARNED: StashKey[set[tuple[str, str, str]]] = StashKey()  # (user, day, job) already logged


class BudgetExceeded(LLMError):
    """A background call on behalf of a person whose daily budget is spent."""


def today() -> str:
    return datetime.now(UTC).date().isoformat()


def cost_usd(prices: Prices, response: LLMResponse) -> float:
    per_in, per_out = prices.input_per_mtok / 1e6, prices.output_per_mtok / 1e6
    cost = response.input_tokens * per_in + response.output_tokens * per_out
    if response.provider == "anthropic":
        cost += response.cache_read_tokens * per_in * 0.1 + response.cache_write_tokens * per_in * 1.25
    return cost


def _prices(gateway: Services, role: str) -> Prices:
    try:
        return gateway.config.llm.role(role).prices
    except KeyError:
        return gateway.config.llm.prices


def record(gateway: Services, turn: Turn | None, request: LLMRequest, response: LLMResponse) -> None:
    """Add one call to the person's (or nobody's: ``''``) row of the day. Off-The-Record turns leave
    nothing behind, not even their token counts."""
    if turn is not None and turn.otr:
        return
    user_id = turn.user.user_id if turn is not None and turn.user is not None else str(
        request.metadata.get("user_id", ""))
    cost = cost_usd(_prices(gateway, request.role), response)
    observe_llm(request.role, input_tokens=response.input_tokens, output_tokens=response.output_tokens,
                cache_read_tokens=response.cache_read_tokens, cache_write_tokens=response.cache_write_tokens,
                cost_usd=cost)  # /metrics: tokens and cost by role (gateway/ops/metrics.py)
    state = getattr(gateway, "state", None)
    if state is None:
        return
    try:
        state.usage.add(user_id=user_id, day=today(), role=request.role, provider=response.provider or "",
                        model=response.model or "", input_tokens=response.input_tokens,
                        output_tokens=response.output_tokens, cache_read_tokens=response.cache_read_tokens,
                        cache_write_tokens=response.cache_write_tokens, cost_usd=cost)
    except Exception:  # bookkeeping never costs a person their answer
        log.exception("recording model usage failed")


def spent_today(gateway: Services, user_id: str) -> float:
    return float(gateway.state.usage.cost_on(user_id, today()))


def over_budget(gateway: Services, user_id: str, job: str) -> bool:
    """True (logged once per person, day and job) when ``user_id``'s daily budget is spent."""
    budget = gateway.config.llm.daily_budget_usd
    if not budget or not user_id:
        return False
    spent = spent_today(gateway, user_id)
    if spent < budget:
        return False
    warned = gateway.stash.setdefault(BUDGET_WARNED, set())
    key = (user_id, today(), job)
    if key not in warned:
        warned.add(key)
        log.warning("budget: %s stopped for user %s: $%.4f spent today of a $%.2f daily budget "
                    "(llm.daily_budget_usd); background jobs resume tomorrow (UTC), chat goes on",
                    job, user_id, spent, budget)
    return True
