"""Hand-written ``## Aliases`` sections in people files feed the alias map: a message that names a
person by an alias loads that person's notes into the prompt."""

from __future__ import annotations

from gateway.testing import GatewayFactory
from plugins.people import aliases, section_aliases
from tests.memory_edit.conftest import say, store
from tests.memory_edit.test_canary import PromptRecorder


def test_section_aliases_reads_bullets_lines_and_commas() -> None:
    text = ("# Samantha Reed\n\n## Aliases\n\n- Sammy\n* Sam R., Dr. Reed\nthe boss\n\n## Notes\n\n"
            "- not an alias\n\n## aliases:\n1. Sam-Sam\n")
    assert section_aliases(text) == ["Sammy", "Sam R.", "Dr. Reed", "the boss", "Sam-Sam"]
    assert section_aliases("# X\n\n- no section\n") == []


async def test_an_alias_in_a_people_file_brings_its_notes_into_the_prompt(kith_gateway: GatewayFactory) -> None:
    rec = PromptRecorder()
    gw = await kith_gateway(plugins=(rec,), memory={"recall_k": 0})  # only the people stage can bring notes
    await say(gw, "hi")
    s = store(gw)
    s.write("people/samantha.md", "# Samantha Reed\n\nWorks at the observatory; allergic to cats.\n\n"
                                  "## Aliases\n\n- Sammy\n- Dr. Reed, the stargazer\n", source="test")
    s.write("people/_aliases.json", '{"sammy": "someone-else", "bob": "bob"}\n', source="test")
    known = aliases(s)
    assert known["sammy"] == "samantha" and known["dr reed"] == "samantha" and known["the stargazer"] == "samantha"
    assert known["bob"] == "bob"

    await say(gw, "I had lunch with Dr. Reed today")
    assert "allergic to cats" in rec.prompts[-1]
    await say(gw, "what should I cook for the stargazer?")
    assert "allergic to cats" in rec.prompts[-1]
    # An edit by hand takes effect on the next turn.
    s.write("people/samantha.md", "# Samantha Reed\n\nWorks at the observatory; allergic to cats.\n", source="test")
    await say(gw, "I had lunch with Sammy again")
    assert "allergic to cats" not in rec.prompts[-1]
