"""Fixtures of the delivery tests: a started daemon (port 0) like the API tests use."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.app import Gateway
from gateway.testing import ConfigFactory
from tests.signin.rig import daemon


@pytest.fixture
async def gw(kith_config: ConfigFactory) -> AsyncIterator[Gateway]:
    async with daemon(kith_config()) as gateway:
        yield gateway
