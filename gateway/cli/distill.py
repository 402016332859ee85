"""``kith distill short|mid|long --user U``: run one distillation tier now.

Runs on the files directly (guarded store, the configured model), so it works with or without a
running daemon; a running daemon's index picks the new tier file up at its next sync. Against a
running daemon, ``POST /api/users/{uid}/distill/<tier>`` (operator) queues the same work on its job bus instead.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from dataclasses import asdict
from datetime import UTC, datetime

from gateway.cli.common import load_or_exit, user_store
from gateway.config import Config


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("distill", help="run a memory distillation tier (short | mid | long) for one user")
    p.add_argument("tier", choices=("short", "mid", "long"))
    p.add_argument("--user", required=True, help="user id (users/<id>/)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


async def distill(config: Config, user: str, tier: str, *, as_json: bool = False) -> int:
    from gateway.llm.base import LLMError
    from gateway.llm.provider import make_provider
    from gateway.memory.background.distill import DistillOutputError, run_tier
    from gateway.state import open_config_state

    store = user_store(config, user)
    if store is None:
        return 2
    provider = make_provider(config.llm)  # one client; the request's role picks the model (main / cheap)
    state = open_config_state(config)
    state.distill_runs.started(user, tier)
    try:
        result = await run_tier(tier, store=store, cfg=config.background.distill,  # type: ignore[arg-type]
                                providers={"main": provider, "cheap": provider}, now=datetime.now(UTC), force=True)
        state.distill_runs.finished(user, tier, result.status, result.detail, result.chars)
    except (LLMError, DistillOutputError) as exc:
        state.distill_runs.finished(user, tier, "failed", str(exc), 0)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        await provider.close()
        state.close()
    if as_json:
        print(json.dumps(asdict(result)))
    else:
        detail = f" ({result.detail})" if result.detail else ""
        print(f"{result.tier}: {result.status} {result.file}, {result.chars} characters{detail}")
    return 0


def run(args: argparse.Namespace) -> int:
    return asyncio.run(distill(load_or_exit(args), args.user, args.tier, as_json=args.json))
