"""Fixtures of the API tests: a started daemon with people made through kith's own message path."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.config import Config
from gateway.testing import ConfigFactory
from tests.signin.rig import daemon

Daemon = Callable[..., AbstractAsyncContextManager[Gateway]]


@pytest.fixture
async def gw(kith_config: ConfigFactory) -> AsyncIterator[Gateway]:
    async with daemon(kith_config()) as gateway:
        yield gateway


@pytest.fixture
def make_daemon(kith_config: ConfigFactory) -> Callable[..., AbstractAsyncContextManager[Gateway]]:
    def make(config: Config | None = None, **overrides: Any) -> AbstractAsyncContextManager[Gateway]:
        return daemon(config or kith_config(**overrides))

    return make
