"""Acceptance: after /forget, 200 recalls and the prompts of the turns that follow hold the canary
0 times. The canary is everywhere a memory can be: said in conversation (transcript, session log,
turn points), in USER.md (snapshotted into the live session's prompt), a nightly memory file, a
people note, a digest (MEMORY_SHORT.md, in every prompt), and a knowledge-graph fact."""

from __future__ import annotations

from gateway.app import Gateway
from gateway.hookspecs import hookimpl
from gateway.memory.files.scopes import user_scope
from gateway.testing import GatewayFactory
from gateway.types import LLMRequest, Turn
from tests.memory_edit.conftest import say, store, uid

CANARY = "saffron-canary-9931"
QUERIES = [
    CANARY, "saffron", "canary", "9931", "grandmother's secret recipe", "what spice is in the recipe",
    "saffron threads", "secret recipe", "granny", "what do you know about my grandmother",
    "recipe", "cooking", "spices", "what did I tell you last time", "family", "kitchen", "paella",
    "yellow spice", "expensive spice", "threads",
]


class PromptRecorder:
    def __init__(self) -> None:
        self.prompts: list[str] = []

    @hookimpl
    def gateway_before_llm_call(self, gateway: Gateway, turn: Turn, request: LLMRequest) -> None:
        parts = [f"{s.title}\n{s.text}" for s in request.system] + [str(m.content) for m in request.messages]
        self.prompts.append("\n".join(parts))


async def test_after_forget_200_recalls_and_prompts_hold_the_canary_0_times(kith_gateway: GatewayFactory) -> None:
    rec = PromptRecorder()
    gw = await kith_gateway(plugins=(rec,))
    await say(gw, "hi")
    user = uid(gw)
    for text in (f"My grandmother's secret recipe uses {CANARY} threads.",
                 f"Remember, the paella needs the {CANARY} soaked first.",
                 "Also the rice must be bomba rice."):
        await say(gw, text)
    s = store(gw)
    s.write("USER.md", f"# Profile\n\n## Notes\n\n- Keeps a jar of {CANARY} from her grandmother\n"
                       "- Likes long walks\n", source="test")
    s.write("memories/2026-01-02.md", f"# Memories 2026-01-02\n\n## Night of x\n\n- Cooked paella with {CANARY}\n"
                                      "- Went to the market\n", source="test")
    s.write("people/granny.md", f"# Granny\n\n- Grows {CANARY} on the balcony\n", source="test")
    s.write("MEMORY_SHORT.md", f"# This week\n\n- Talked about {CANARY} and paella\n- Bought rice\n",
            source="test")
    assert gw.kg is not None
    gw.kg.add(user, user, "owns", f"a jar of {CANARY}", source_ref="test:canary")
    await gw.settle()
    assert gw.memory is not None
    before = [h for h in await gw.memory.recall(scope=user_scope(user), query=CANARY, k=20) if CANARY in h.text]
    assert len(before) >= 4, "the canary is indexed in files and turns before the forget"

    await say(gw, "/new")
    await say(gw, "tell me about my grandmother")  # this session's profile snapshot holds the canary
    assert CANARY in rec.prompts[-1]

    answer = await say(gw, f"/forget {CANARY}")
    assert "This would forget" in answer or "Forgotten" in answer
    if "This would forget" in answer:
        answer = await say(gw, "/forget confirm")
    assert "Forgotten" in answer and "USER.md" in answer and "people/granny.md" in answer and "fact" in answer

    hits = 0
    for i in range(200):
        found = await gw.memory.recall(scope=user_scope(user), query=QUERIES[i % len(QUERIES)], k=10)
        hits += sum(CANARY in h.text for h in found)
    assert hits == 0
    seen = len(rec.prompts)
    for i in range(40):
        await say(gw, QUERIES[1 + i % (len(QUERIES) - 1)])
    prompts = rec.prompts[seen:]
    assert len(prompts) == 40 and not [p for p in prompts if CANARY in p]
    files = "".join(p.read_text(errors="replace") for p in s.root.rglob("*.md"))
    assert CANARY not in files
    assert not [f for f in gw.kg.all(user) if CANARY in f.object]


async def test_forget_in_the_live_session_clears_its_history_and_undo_brings_it_back(
        kith_gateway: GatewayFactory) -> None:
    rec = PromptRecorder()
    gw = await kith_gateway(plugins=(rec,))
    await say(gw, "hi")
    user = uid(gw)
    await say(gw, f"The wifi password at the cabin is {CANARY}, keep it safe.")
    await say(gw, "And the cabin is by the lake.")
    await say(gw, "what else?")
    assert CANARY in rec.prompts[-1], "the live history holds it before the forget"

    answer = await say(gw, f"/forget {CANARY}")
    if "This would forget" in answer:
        answer = await say(gw, "/forget confirm")
    assert "of our conversations" in answer
    for i in range(20):
        await say(gw, QUERIES[1 + i % (len(QUERIES) - 1)])
    assert not [p for p in rec.prompts[-20:] if CANARY in p]
    assert "the cabin is by the lake" in rec.prompts[-1], "only the matching line is gone from the history"
    assert not gw.state.turns.rows_with_words(user, CANARY)
    assert not [h for h in await gw.memory.recall(scope=user_scope(user), query=CANARY, k=20) if CANARY in h.text]

    assert "Restored" in await say(gw, "/forget undo")
    assert gw.state.turns.rows_with_words(user, CANARY)
    await gw.settle()
    assert [h for h in await gw.memory.recall(scope=user_scope(user), query=CANARY, k=20) if CANARY in h.text]
