"""Issue 29, item 3: a third-party channel owns its config section, as the built-in ones do.

``kith_pigeon`` (tests/channels/kith_pigeon/) is installed here as a distribution with two entry
points, exactly as a plugin from PyPI would be: ``kith.config`` (its section's model and checks,
loaded whenever a config is read) and ``kith`` (its adapter, loaded at start). Nothing in ``gateway/``
names it; ``channels.pigeon`` is validated with its model, reported with the host's problems, and its
adapter runs under the host with the host's access policy applied to its section.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from gateway.app import Gateway
from gateway.cli.main import main
from gateway.config import ConfigError
from gateway.configread import parse_config
from gateway.plugins import build_plugin_host
from tests.channels.kith_pigeon.config import PigeonConfig
from tests.conftest import make_config

SECRET = "pigeon-secret-0123456789"
PIGEON = {"enabled": True, "secret": SECRET, "dm_policy": "allowlist", "allow_from": ["ada"]}


def _install(tmp_path: Path, config_module: str) -> Path:
    """A real distribution on sys.path whose entry points name the pigeon's two modules."""
    site = tmp_path / "site"
    dist = site / "kith_pigeon-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kith-pigeon\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[kith]\npigeon = tests.channels.kith_pigeon.plugin\n\n"
                                           f"[kith.config]\npigeon = {config_module}\n")
    sys.path.insert(0, str(site))
    return site


@pytest.fixture
def installed_pigeon(tmp_path: Path) -> Iterator[None]:
    site = _install(tmp_path, "tests.channels.kith_pigeon.config")
    yield
    sys.path.remove(str(site))


def test_a_declaring_plugin_that_fails_to_load_is_named_with_its_section(tmp_path: Path) -> None:
    site = _install(tmp_path, "tests.channels.kith_pigeon.no_such_module")
    try:
        with pytest.raises(ConfigError) as err:
            parse_config({"channels": {"pigeon": PIGEON}}, env={})
        # Without its section nothing here needs it: reading the config works, as it did before (start-up,
        # and kith check-config, name the broken plugin: gateway.plugins.build_plugin_host).
        cfg = parse_config({}, env={})
        with pytest.raises(ConfigError, match="entry point 'pigeon' from kith-pigeon failed to load"):
            build_plugin_host(cfg)
    finally:
        sys.path.remove(str(site))
    assert err.value.problems[0].startswith("channels.pigeon: unknown key (no plugin declares that channel")
    assert err.value.problems[1].startswith("entry point 'pigeon' from kith-pigeon failed to load: No module named")
    assert len(err.value.problems) == 2


def _check_config(tmp_path: Path, capsys: pytest.CaptureFixture[str], **sections: Any) -> tuple[int, list[str]]:
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"data_dir": str(tmp_path / "data"), "llm": {"provider": "echo"}, **sections}))
    code = main(["check-config", str(path)])
    captured = capsys.readouterr()
    return code, [line.strip().removeprefix("- ") for line in (captured.err + captured.out).splitlines()]


def test_a_valid_pigeon_section_passes_check_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], installed_pigeon: None
) -> None:
    code, out = _check_config(tmp_path, capsys, channels={"pigeon": {**PIGEON, "digest_role": "main"}})
    assert code == 0, out
    assert out[-1].endswith(": OK")
    cfg = parse_config({"channels": {"pigeon": PIGEON}}, env={})
    pigeon = cfg.channels.section("pigeon", PigeonConfig)
    assert pigeon.secret is not None and pigeon.secret.get_secret_value() == SECRET
    assert pigeon.allow_from == ["ada"] and pigeon.max_text_chars == 2000  # its defaults, its types


def test_check_config_reports_the_channels_and_the_hosts_problems_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], installed_pigeon: None
) -> None:
    code, out = _check_config(tmp_path, capsys, server={"port": -1}, channels={
        "pigeon": {"enabled": True, "colour": "grey", "max_text_chars": 0, "webhook_path": "loft"},
        "carrier": {"enabled": True},
    })
    assert code == 2
    assert {
        "server.port: Input should be greater than or equal to 0",
        "channels.pigeon.colour: unknown key",
        "channels.pigeon.max_text_chars: Input should be greater than or equal to 1",
        "channels.pigeon.webhook_path: Value error, must start with '/'",
    } <= set(out), out
    declared = "discord, email, matrix, nextcloud, pigeon, signal, slack, telegram, websocket, whatsapp"
    assert any(line.startswith("channels.carrier: unknown key (no plugin declares that channel; declared: "
                               f"{declared})") for line in out), out


def test_the_channels_own_checks_and_model_roles_join_the_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], installed_pigeon: None
) -> None:
    # Valid in shape, wrong in meaning: the checks that need the whole config, host's and channel's.
    code, out = _check_config(tmp_path, capsys, media={"max_bytes": 1000, "upload_total_bytes": 10},
                              background={"writer": {"backend": "tiny"}},
                              channels={"pigeon": {"enabled": True, "digest_role": "owl"}})
    assert code == 2
    known = "(known: main, cheap, vision, transcription; add it under llm.roles)"
    assert {
        f"background.writer.backend: unknown model role 'tiny' {known}",
        f"channels.pigeon.digest_role: unknown model role 'owl' {known}",
        "channels.pigeon.secret: required when the pigeon channel is enabled",
        "media.upload_total_bytes: 10 is below media.max_bytes (1,000): a file at the size cap could never be "
        "uploaded",
    } <= set(out), out


def test_without_the_plugin_its_section_is_an_unknown_key(tmp_path: Path, installed_pigeon: None) -> None:
    # With entry points on, kith's own Matrix, Slack, Signal and WhatsApp plugins declare theirs too.
    everyone = "discord, email, matrix, nextcloud, signal, slack, telegram, websocket, whatsapp"
    for plugins, declared in (({"entry_points": False}, "discord, nextcloud, telegram, websocket"),
                              ({"deny": ["pigeon"]}, everyone)):
        with pytest.raises(ConfigError) as err:
            parse_config({"plugins": plugins, "channels": {"pigeon": PIGEON}}, env={})
        assert err.value.problems == ["channels.pigeon: unknown key (no plugin declares that channel; declared: "
                                      f"{declared})"]


async def test_the_pigeon_adapter_runs_on_its_own_section(tmp_path: Path, installed_pigeon: None) -> None:
    cfg = make_config(tmp_path, plugins={"entry_points": True}, channels={"pigeon": PIGEON})
    async with Gateway(cfg) as gw, aiohttp.ClientSession() as http:
        assert gw.registrations.channels.plugin_of("pigeon") == "pigeon:config"  # its kith.config module
        adapter: Any = gw.adapters["pigeon"]
        assert adapter.cfg is cfg.channels.get("pigeon")
        url = f"http://127.0.0.1:{gw.port}/pigeon/loft"
        async with http.post(url, json={"from": "ada", "text": "coo"}) as resp:
            assert resp.status == 401  # unsigned: the adapter's own check
        signed = {"X-Pigeon-Secret": SECRET}
        # The loft posts plain text. A webhook path the section declares is exempt from the host's
        # JSON-only rule for unsafe requests (a browser's defence, gateway/http/guard.py).
        async with http.post(url, data=json.dumps({"from": "ada", "text": "coo"}),
                             headers={**signed, "Content-Type": "text/plain"}) as resp:
            assert resp.status == 200, await resp.text()
        async with http.post(url, json={"from": "mallory", "text": "coo"}, headers=signed) as resp:
            assert resp.status == 200
        # The webhook answers once the turn is done. The host's access policy read the pigeon's section:
        # ada is on its allow list, mallory is not.
        assert [who for who, _text in adapter.delivered] == ["ada"]
        assert "coo" in adapter.delivered[0][1]
