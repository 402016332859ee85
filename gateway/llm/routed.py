"""The one path every model call takes: ``gateway_llm_call``, for turns and background jobs alike.

Background jobs (compaction, memory writer, sleep cycle, distillation) used to call the provider
directly, so a plugin overriding ``gateway_llm_call`` (a router, a cost meter, a test fake) never saw
them. ``gateway.model(role)`` returns a ``RoutedModel``, which quacks like a provider but sends each
request through the hook with ``turn=None``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gateway.llm.base import DeltaCallback, LLMError
from gateway.llm.usage import BudgetExceeded, over_budget
from gateway.types import LLMRequest, LLMResponse

if TYPE_CHECKING:
    from gateway.services import Services


class RoutedModel:
    def __init__(self, gateway: Services, role: str, user_id: str = "") -> None:
        self.gateway = gateway
        self.role = role
        self.user_id = user_id  # the person the job works for: their usage, their budget

    @property
    def name(self) -> str:
        return self.gateway.llm(self.role).name

    async def complete(self, request: LLMRequest, on_delta: DeltaCallback | None = None) -> LLMResponse:
        if request.role != self.role:
            request = replace(request, role=self.role)
        if self.user_id:
            if over_budget(self.gateway, self.user_id, request.metadata.get("job", self.role)):
                raise BudgetExceeded(f"daily budget of user {self.user_id} is spent",
                                     user_message="Today's model budget is spent.")
            request = replace(request, metadata={**request.metadata, "user_id": self.user_id})
        response = await self.gateway.hooks.llm_call(self.gateway, None, request, on_delta)
        if response is None:
            raise LLMError(f"no plugin answered gateway_llm_call for a {self.role!r} background call")
        return response

    async def close(self) -> None:
        return None  # the gateway owns and closes the providers behind it
