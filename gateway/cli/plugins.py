"""``kith plugins``: every plugin, where it came from and the hooks it implements."""

from __future__ import annotations

import argparse
import json

from gateway.cli.common import load_or_exit
from gateway.plugins import build_plugin_host


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("plugins", help="list plugins, their source and hooks")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    host = build_plugin_host(load_or_exit(args))
    infos = host.plugins()
    if args.json:
        print(json.dumps([{"name": i.name, "source": i.source, "hooks": i.hooks} for i in infos]
                         + [{"name": n, "source": s, "blocked": True} for n, s in host.blocked], indent=2))
        return 0
    width = max((len(i.name) for i in infos), default=10)
    for info in infos:
        print(f"{info.name:<{width}}  {info.source}")
        for hook in info.hooks:
            print(f"{'':<{width}}    {hook}")
    for name, source in host.blocked:
        print(f"{name:<{width}}  {source}  (blocked by plugins.allow/deny)")
    return 0
