"""``follow_links`` (issue 18, seed 001): the model walks Markdown links between memory files, and no
link leads out of the person's own tree: not by ``../``, an absolute path, percent-encoding, a
symlink (file or folder), a reserved dot-name, nor into another person's tree."""

from __future__ import annotations

import os
from typing import Any

import pytest

from gateway.app import Gateway
from gateway.memory.files import links
from tests.conftest import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic
from tests.tools.test_memory_tools import call, dm, user_root

SECRET = "BOB-SECRET-7f3a"
SAM = """# Sam

Hikes with me; see [the hiking topic](../topics/hiking.md "title") and [<his sister>](<../people/dee.md>).

- [dotdot](../../bob/USER.md)
- [absolute](/etc/passwd)
- [absolute to bob](/{bob_root}/USER.md)
- [encoded](%2e%2e/%2e%2e/bob/USER.md)
- [encoded slashes](..%2F..%2Fbob%2FUSER.md)
- [double encoded](%252e%252e/%252e%252e/bob/USER.md)
- [file symlink](evil.md)
- [folder symlink](linked/USER.md)
- [audit](../.audit.jsonl)
- [web](https://example.com/x.md)
- [file url](file:///etc/passwd)
- [backslash](..\\..\\bob\\USER.md)
- [self](#aliases)

[ref]: ../topics/boats.md
"""
HIKING = "# Hiking\n\nWith [Sam](../people/sam.md) and [Ben](../people/ben.md) in the Alps.\n"


@pytest.fixture
async def linked(make_gateway: GatewayFactory, anthropic_llm: dict[str, Any]) -> Gateway:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0})
    await gw.handle_inbound(dm("hi"))
    await gw.handle_inbound(dm("hi", account="bob"))
    alice, bob = user_root(gw), user_root(gw, "bob")
    gw.memory_store(bob.name).write("USER.md", f"# Bob\n{SECRET}\n", source="test")
    store = gw.memory_store(alice.name)
    store.write("people/sam.md", SAM.replace("{bob_root}", str(bob).lstrip("/")), source="test")
    store.write("topics/hiking.md", HIKING, source="test")
    store.write("topics/boats.md", "# Boats\nA red canoe.\n", source="test")
    store.write("people/dee.md", "# Dee\nSam's sister.\n", source="test")
    store.write("people/ben.md", "# Ben\nA guide in Chamonix.\n", source="test")
    os.symlink(bob / "USER.md", alice / "people" / "evil.md")
    os.symlink(bob, alice / "people" / "linked")
    return gw


async def test_follows_links_and_nothing_escapes(linked: Gateway, fake_anthropic: FakeAnthropic) -> None:
    result = await call(linked, fake_anthropic, "follow_links", {"path": "people/sam.md"}, tier=2)
    text = result["content"]
    assert "is_error" not in result
    assert SECRET not in text and "root:" not in text
    assert "-> topics/hiking.md (hop 1)" in text and "in the Alps" in text
    assert "-> people/dee.md (hop 1)" in text and "Sam's sister" in text
    assert "-> topics/boats.md (hop 1)" in text and "red canoe" in text  # a reference-style link
    refusals = {line.split("](")[0][3:]: line for line in text.splitlines() if line.startswith("- [")}
    for name in ("dotdot", "encoded", "encoded slashes"):
        assert refusals[name].endswith(": outside your memory"), refusals[name]
    for name in ("absolute", "absolute to bob"):
        assert refusals[name].endswith("outside your memory (an absolute path)"), refusals[name]
    assert refusals["double encoded"].endswith("no such file")  # decoded once: a literal "%2e%2e" name
    assert refusals["file symlink"].endswith("refused (PathEscapeError)")
    assert refusals["folder symlink"].endswith("refused (PathEscapeError)")
    assert refusals["audit"].endswith("not a memory file (a reserved name)")
    assert refusals["web"].endswith("not a memory file (a URL)")
    assert refusals["file url"].endswith("not a memory file (a URL)")
    assert refusals["backslash"].endswith("not a valid path")
    assert "self" not in refusals  # a link inside the file is no link to follow
    assert "(hop 2)" not in text and "guide in Chamonix" not in text  # depth 1 stops after one hop

    two = (await call(linked, fake_anthropic, "follow_links", {"path": "people/sam.md", "depth": 2}, tier=2))["content"]
    assert "-> people/ben.md (hop 2)" in two and "guide in Chamonix" in two and SECRET not in two


async def test_the_start_file_is_contained_and_bob_cannot_reach_alice(linked: Gateway,
                                                                       fake_anthropic: FakeAnthropic) -> None:
    for start in ("../bob/USER.md", "/etc/passwd", "%2e%2e/bob/USER.md", "people/evil.md", "people/linked/USER.md",
                  ".audit.jsonl", "people/nobody.md"):
        result = await call(linked, fake_anthropic, "follow_links", {"path": start}, tier=2)
        assert result.get("is_error") is True and SECRET not in result["content"], start
    assert (await call(linked, fake_anthropic, "follow_links", {"path": "people/sam.md", "depth": 3},
                       tier=2)).get("is_error") is True

    # Bob's own file links into Alice's tree by every spelling; Bob's walk never reads Alice's notes.
    bob = user_root(linked, "bob")
    alice = user_root(linked)
    linked.memory_store(bob.name).write(
        "people/x.md", f"[a](../../{alice.name}/people/dee.md) [b](/{str(alice).lstrip('/')}/people/dee.md)\n",
        source="test")
    fake_anthropic.requests.clear()
    fake_anthropic.enqueue_tool_use("follow_links", {"path": "people/x.md"})
    fake_anthropic.enqueue("done")
    await linked.handle_inbound(dm("walk", account="bob", tier=2))
    (result,) = fake_anthropic.tool_results()
    assert "Sam's sister" not in result["content"] and result["content"].count("outside your memory") == 2


def test_resolve_and_rewrite() -> None:
    assert links.resolve("people/sam.md", "../topics/a.md") == ("topics/a.md", "")
    assert links.resolve("people/sam.md", "./ben.md#x") == ("people/ben.md", "")
    assert links.resolve("people/sam.md", "b%20c.md") == ("people/b c.md", "")
    assert links.resolve("people/sam.md", "../../x.md")[0] == ""
    assert links.resolve("people/sam.md", "a/../../../x.md")[0] == ""
    assert links.resolve("", "people/../..")[0] == ""
    assert links.resolve("a.md", ".")[0] == ""
    text = "[Sam](../people/sam-1.md#aliases) and [Sam](sam-1.md) and [x](https://e.com/sam-1.md)"
    out = links.rewrite("topics/t.md", text, lambda p: "people/sam.md" if p == "people/sam-1.md" else None)
    assert out == "[Sam](../people/sam.md#aliases) and [Sam](sam-1.md) and [x](https://e.com/sam-1.md)"
