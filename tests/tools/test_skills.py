"""Skills (gateway/skills.py, plugins/tools/skill_tool.py): folders with a SKILL.md in the Agent Skills
format. Two sample skills (tests/tools/sample_skills/) show the progressive loading through the real
Anthropic client and the fake server: only their descriptions are in the first prompt, the ``skill``
tool loads one's instructions and then one of its files, and the test reports the prompt tokens
before and after. Broken skills are reported and left out without hiding the others; a file is read
only inside its skill's folder."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gateway import skills
from gateway.app import Gateway
from gateway.cli.main import main as kith
from gateway.turn.budget import estimate_tokens
from gateway.types import ConversationKind, InboundMessage
from tests.conftest import GatewayFactory
from tests.fakes.anthropic import FakeAnthropic

SAMPLES = Path(__file__).parent / "sample_skills"


def write_skill(root: Path, name: str, text: str) -> Path:
    folder = root / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(text, encoding="utf-8")
    return folder


def prompt_tokens(request: dict[str, Any]) -> int:
    """What one request costs in prompt tokens (estimate_tokens, ~4 characters each): system, messages
    and tool schemas as sent."""
    system = FakeAnthropic.system_of(request)
    return (estimate_tokens(system) + estimate_tokens(json.dumps(request["messages"], ensure_ascii=False))
            + estimate_tokens(json.dumps(request.get("tools", []), ensure_ascii=False)))


def result_text(fake: FakeAnthropic, index: int = -1) -> str:
    (result,) = fake.tool_results(index)
    content = result["content"]
    return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)


def skill_description(request: dict[str, Any]) -> str:
    return next(t["description"] for t in request.get("tools", []) if t["name"] == "skill")


def dm(text: str, account: str = "alice", kind: ConversationKind = ConversationKind.DM) -> InboundMessage:
    return InboundMessage(channel="websocket", account_id=account, conversation_id="room" if kind is
                          ConversationKind.GROUP else account, text=text, trusted=True, kind=kind,
                          timestamp=datetime.now(UTC))  # fmt: skip


# ------------------------------------------------------------------------------ reading SKILL.md


def test_the_samples_parse_and_only_their_descriptions_are_the_catalogue() -> None:
    book = skills.catalogue([(SAMPLES, "operator")])
    assert [s.name for s in book.skills] == ["meeting-notes", "trip-planner"] and book.problems == ()
    trip = book.get("trip-planner")
    assert trip is not None and trip.description.startswith("Plan a trip day by day")
    assert trip.metadata == {"license": "CC0-1.0", "metadata": {"author": "kith tests"}}
    _, body = skills.read_skill(trip.root, trip.origin)
    assert body.startswith("# Planning a trip") and "---" not in body.splitlines()[0]
    assert skills.files(trip) == ["references/packing.md"]


@pytest.mark.parametrize(("text", "error"), [
    ("# no front matter\n", "must start with YAML front matter"),
    ("---\nname: broken\ndescription: [unclosed\n---\nbody\n", "not valid YAML"),
    ("---\n- a\n- list\n---\nbody\n", "must be a mapping"),
    ("---\nname: other-name\ndescription: x\n---\n", "the folder is 'broken'"),
    ("---\nname: broken\n---\nbody\n", "'description' is missing"),
    ("---\nname: Broken\ndescription: x\n---\n", "'name' must be"),
    ("---\nname: broken\ndescription: " + "x" * 1100 + "\n---\n", "longer than 1024"),
    ("---\nname: broken\ndescription: !!python/object/apply:os.system ['echo hi']\n---\n", "not valid YAML"),
    ("---\nname: broken\ndescription: x\nextra: " + "y" * 9000 + "\n---\n", "front matter is longer"),
])
def test_a_broken_skill_is_reported_and_the_others_stay(tmp_path: Path, text: str, error: str) -> None:
    shutil.copytree(SAMPLES / "meeting-notes", tmp_path / "meeting-notes")
    write_skill(tmp_path, "broken", text)
    book = skills.catalogue([(tmp_path, "operator")])
    assert [s.name for s in book.skills] == ["meeting-notes"]
    (problem,) = book.problems
    assert problem.path == tmp_path / "broken" and error in problem.message


def test_size_limits_and_binary_files(tmp_path: Path) -> None:
    write_skill(tmp_path, "huge", "---\nname: huge\ndescription: x\n---\n" + "z" * skills.MAX_SKILL_BYTES)
    (tmp_path / "nul").mkdir()
    (tmp_path / "nul" / "SKILL.md").write_bytes(b"---\nname: nul\ndescription: x\n---\n\x00")
    book = skills.catalogue([(tmp_path, "operator")])
    assert book.skills == ()
    assert sorted(p.message.split(": ", 1)[1] for p in book.problems) == [
        "SKILL.md: larger than 100,000 bytes", "SKILL.md: not a text file"]


def test_files_are_read_only_inside_the_skill(tmp_path: Path) -> None:
    shutil.copytree(SAMPLES / "trip-planner", tmp_path / "skills" / "trip-planner")
    (tmp_path / "secret.txt").write_text("the operator's secret")
    root = tmp_path / "skills" / "trip-planner"
    (root / "references" / "out.md").symlink_to(tmp_path / "secret.txt")
    (root / "linked").symlink_to(tmp_path)
    (root / ".env").write_text("TOKEN=1")
    (root / "references" / "big.md").write_text("b" * (skills.MAX_RESOURCE_BYTES + 1))
    (root / "references" / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    skill = skills.catalogue([(tmp_path / "skills", "operator")]).get("trip-planner")
    assert skill is not None
    assert "Cold (under 5 °C)" in skills.read_file(skill, "references/packing.md")
    assert "Cold" in skills.read_file(skill, "./references//packing.md")
    for bad in ("../../secret.txt", "/etc/passwd", "references/out.md", "linked/secret.txt", ".env",
                "references/../../../secret.txt", "SKILL.md", ""):
        with pytest.raises(skills.SkillError):
            skills.read_file(skill, bad)
    with pytest.raises(skills.SkillError, match="larger than"):
        skills.read_file(skill, "references/big.md")
    with pytest.raises(skills.SkillError, match="not a text file"):
        skills.read_file(skill, "references/image.png")
    assert "references/out.md" not in skills.files(skill) and ".env" not in skills.files(skill)


# ------------------------------------------------------------------------------ through a turn


async def test_skills_load_progressively_and_the_token_cost_is_measured(
        make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic, anthropic_llm: dict[str, Any],
        capsys: pytest.CaptureFixture[str]) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, tools={"skills": {"dirs": [str(SAMPLES)]}})
    trip_body = skills.read_skill(SAMPLES / "trip-planner", "operator")[1]

    fake_anthropic.enqueue("Where to, and when?")
    await gw.handle_inbound(dm("help me plan a trip"))
    first = fake_anthropic.last_turn()
    catalogue = skill_description(first)
    assert "- trip-planner: Plan a trip day by day" in catalogue and "- meeting-notes: Turn a meeting" in catalogue
    assert "PACKING-LIST-READ" not in json.dumps(first), "no skill body before it is loaded"
    before = prompt_tokens(first)

    fake_anthropic.enqueue_tool_use("skill", {"name": "trip-planner"})
    fake_anthropic.enqueue_tool_use("skill", {"name": "trip-planner", "file": "references/packing.md"})
    fake_anthropic.enqueue("Day 1: train to Porto. Pack a light jacket for the evenings.")
    reply = await gw.handle_inbound(dm("Lisbon and Porto, 3 to 6 June, just me"))
    assert reply is not None and "light jacket" in reply.text
    asked, loaded_body, loaded_file = fake_anthropic.turn_requests()[-3:]  # the results come in the next call
    body_text = result_text(fake_anthropic, fake_anthropic.requests.index(loaded_body))
    assert body_text.startswith("Skill trip-planner: follow these instructions.") and trip_body in body_text
    assert "Files of this skill (read one with file): references/packing.md" in body_text
    assert "Cold (under 5 °C)" in result_text(fake_anthropic, fake_anthropic.requests.index(loaded_file))
    assert "Turn a meeting" in skill_description(loaded_file), "the catalogue stays; meeting-notes was never loaded"
    assert "Never invent an owner" not in json.dumps(loaded_file)

    # Measured: the catalogue is what every turn pays; a body only the turns that load it.
    bare = prompt_tokens({**first, "tools": [t for t in first["tools"] if t["name"] != "skill"]})
    catalogue_cost = before - bare
    body_cost = prompt_tokens(loaded_body) - prompt_tokens(asked)
    all_bodies = sum(estimate_tokens(skills.read_skill(SAMPLES / n, "operator")[1])
                     for n in ("trip-planner", "meeting-notes"))
    with capsys.disabled():
        print(f"\nskills: first prompt {bare} tokens without skills, {before} with the two skills' catalogue "
              f"(+{catalogue_cost}); loading trip-planner added {body_cost} tokens to the next call; both bodies "
              f"in the prompt would be {all_bodies}")
    assert 0 < catalogue_cost < 200, "two catalogue lines and the loader's schema"
    assert body_cost >= estimate_tokens(trip_body), "the body is paid once it is loaded"
    assert catalogue_cost < all_bodies


async def test_persona_skills_and_the_gates(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                            anthropic_llm: dict[str, Any], tmp_path: Path) -> None:
    gw = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0}, tools={"skills": {"dirs": [str(SAMPLES)]}})
    persona_skills = Path(gw.config.data_dir) / "personas" / "kith" / "skills"
    write_skill(persona_skills, "meeting-notes", "---\nname: meeting-notes\ndescription: The persona's own "
                "minutes, in haiku.\n---\nWrite MINUTES-IN-HAIKU.\n")
    write_skill(persona_skills, "bad", "---\nname: nope\n---\n")

    fake_anthropic.enqueue_tool_use("skill", {"name": "meeting-notes"})
    fake_anthropic.enqueue("done")
    await gw.handle_inbound(dm("minutes please"))
    catalogue = skill_description(fake_anthropic.last_turn())
    assert "- meeting-notes: The persona's own minutes, in haiku." in catalogue, "the persona's skill wins"
    assert "- trip-planner:" in catalogue and "bad" not in catalogue
    assert "MINUTES-IN-HAIKU" in result_text(fake_anthropic)

    fake_anthropic.enqueue_tool_use("skill", {"name": "trip-planner", "file": "../meeting-notes/SKILL.md"})
    fake_anthropic.enqueue("done")
    await gw.handle_inbound(dm("read it"))
    (result,) = fake_anthropic.tool_results()
    assert result.get("is_error") and "not a file of the skill" in result_text(fake_anthropic)

    # Reading a skill writes nothing and reads no one's memory: Off-The-Record and in groups too.
    fake_anthropic.enqueue("ok")
    await gw.handle_inbound(dm("/otr on"))
    await gw.handle_inbound(dm("still there?"))
    assert "skill" in fake_anthropic.tool_names(-1)
    await gw.handle_inbound(dm("/otr off"))
    fake_anthropic.enqueue("ok")
    await gw.handle_inbound(dm("hello all", kind=ConversationKind.GROUP))
    assert "skill" in fake_anthropic.tool_names(-1)
    fake_anthropic.enqueue("ok")
    await gw.handle_inbound(InboundMessage(channel="websocket", account_id="alice", conversation_id="alice",
                                           text="hi", trusted=True, raw={"tier": 1}))
    assert "skill" not in fake_anthropic.tool_names(-1), "tier 1 loads no tools"


async def test_no_skills_no_tool_and_no_tokens(make_gateway: GatewayFactory, fake_anthropic: FakeAnthropic,
                                               anthropic_llm: dict[str, Any], tmp_path: Path) -> None:
    gw: Gateway = await make_gateway(llm=anthropic_llm, memory={"recall_k": 0},
                                     tools={"skills": {"dirs": [str(tmp_path / "empty")]}})
    fake_anthropic.enqueue("hi")
    await gw.handle_inbound(dm("hi"))
    assert "skill" not in fake_anthropic.tool_names(-1)


def test_kith_skills_list_and_show(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(SAMPLES, tmp_path / "skills")
    write_skill(tmp_path / "skills", "broken", "---\nname: broken\n---\n")
    write_skill(tmp_path / "data" / "personas" / "ada" / "skills", "ada-only", "---\nname: ada-only\n"
                "description: Ada's own skill.\n---\nAda's instructions.\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\nllm: {{provider: echo}}\n"
                      f"tools: {{skills: {{dirs: [{tmp_path / 'skills'}]}}}}\n")
    assert kith(["-c", str(config), "skills", "list"]) == 1, "a broken skill makes the listing fail"
    out = capsys.readouterr()
    assert "meeting-notes" in out.out and "trip-planner" in out.out and "operator" in out.out
    assert "broken" in out.err and "'description' is missing" in out.err
    assert "ada-only" not in out.out
    assert kith(["-c", str(config), "skills", "list", "--persona", "ada", "--json"]) == 1
    listed = json.loads(capsys.readouterr().out)
    assert {s["name"]: s["origin"] for s in listed["skills"]}["ada-only"] == "persona:ada"
    assert kith(["-c", str(config), "skills", "show", "trip-planner"]) == 0
    shown = capsys.readouterr().out
    assert "# Planning a trip" in shown and "references/packing.md" in shown
    assert kith(["-c", str(config), "skills", "show", "nope"]) == 2
    assert skills.catalogue([(tmp_path / "gone", "operator"), (tmp_path / "none", "persona:ada")]).problems == (
        skills.Problem(path=tmp_path / "gone", message=f"{tmp_path / 'gone'}: no such folder"),)
