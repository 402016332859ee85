"""Both API SDKs' errors become the same ``LLMError``s (``gateway.llm.base.sdk_errors``): which are
retryable, and what the person is told."""

from __future__ import annotations

from types import ModuleType

import anthropic
import httpx
import openai
import pytest

from gateway.llm.base import LLMError, sdk_errors

REQUEST = httpx.Request("POST", "http://127.0.0.1:9/v1/x")


def _status(sdk: ModuleType, cls: str, code: int) -> Exception:
    error: Exception = getattr(sdk, cls)("no", response=httpx.Response(code, request=REQUEST), body=None)
    return error


@pytest.mark.parametrize("sdk", [anthropic, openai], ids=["anthropic", "openai"])
def test_an_sdks_errors_map_alike(sdk: ModuleType) -> None:
    cases: list[tuple[Exception, bool, str]] = [
        (_status(sdk, "AuthenticationError", 401), False, "rejected the API key"),
        (_status(sdk, "RateLimitError", 429), True, "rate limit"),
        (sdk.APITimeoutError(request=REQUEST), True, "timed out"),
        (_status(sdk, "InternalServerError", 503), True, "error 503"),
        (_status(sdk, "BadRequestError", 400), False, "error 400"),
        (sdk.APIConnectionError(request=REQUEST), True, "cannot reach the server"),
        (httpx.ConnectError("refused"), True, "cannot reach the server"),
    ]
    transport = (httpx.TransportError,)
    for raised, retryable, message in cases:
        with pytest.raises(LLMError) as err, sdk_errors(sdk, "x", server="the server", unreachable=transport):
            raise raised
        assert err.value.retryable is retryable and message in str(err.value)
        assert err.value.__cause__ is raised
    with pytest.raises(LLMError) as err, sdk_errors(sdk, "x", server="the server"):
        raise _status(sdk, "RateLimitError", 429)
    assert "rate-limited" in err.value.user_message
    with pytest.raises(ValueError), sdk_errors(sdk, "x", server="the server"):
        raise ValueError("not the SDK's")
