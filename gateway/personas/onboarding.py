"""``/setup persona``: a person makes their own persona in chat, one question per message (seed 000's
onboarding flow).

Three steps: its name, its voice and style, what it should know. The draft is kept per person (in the
gateway's memory: a restart forgets an unfinished setup) and bound to the conversation it started in,
so the person's other chats go on as usual; ``/setup cancel`` drops it, and it lapses after
``DRAFT_TTL``. While a draft waits, the person's next plain message in that conversation is the
answer: it never reaches the model and is not recorded.

What the person writes is bounded (``MAX_NAME``, ``MAX_VOICE``, ``MAX_KNOWS`` characters), stripped of
control characters and written as quoted text under headings kith writes, so it cannot forge a
heading or a section of its own. It goes only into the new persona's own directory
(``gateway/personas/own.py``): a new directory, created from the shipped template, never an existing
persona, so nothing a person types reaches a persona the operator made or anyone else uses. The
operator's allowlist still applies: a person listed in ``personas.user_personas`` cannot make one,
and ``personas.own_max`` caps how many a person makes.
"""

from __future__ import annotations

import time
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway.memory.files.errors import MemoryStoreError
from gateway.personas import PersonaError, bootstrap, exists, persona_store
from gateway.personas.choice import on_disk
from gateway.personas.own import OWNER_FILE, dir_name, owned
from gateway.types import ConversationKind, Reply, StashKey

if TYPE_CHECKING:
    from gateway.services import Services
    from gateway.types import Turn

HELP_LINE = "/setup persona: make your own persona, step by step (/setup cancel stops)"
MAX_NAME = 40
MAX_VOICE = 1000
MAX_KNOWS = 2000
DRAFT_TTL = 30 * 60.0  # seconds a draft waits for its next answer
MAX_DRAFTS = 1000  # drafts kept at once (oldest dropped): one per person, but people are many
TEMPLATE = "default"  # the shipped template: the operator's personas are never the source


@dataclass
class Draft:
    conversation_key: str
    step: str = "name"  # name -> voice -> knows
    title: str = ""
    voice: str = ""
    touched: float = field(default_factory=time.monotonic)


DRAFTS: StashKey[OrderedDict[str, Draft]] = StashKey()


def _drafts(gateway: Services) -> OrderedDict[str, Draft]:
    return gateway.stash.setdefault(DRAFTS, OrderedDict())


def draft_of(gateway: Services, user_id: str, conversation_key: str) -> Draft | None:
    """The person's draft waiting in this conversation (None: none, or it lapsed)."""
    drafts = _drafts(gateway)
    draft = drafts.get(user_id)
    if draft is None:
        return None
    if time.monotonic() - draft.touched > DRAFT_TTL:
        del drafts[user_id]
        return None
    return draft if draft.conversation_key == conversation_key else None


def _notice(text: str) -> Reply:
    return Reply(text=text, notice=True)


def clean(text: str) -> str:
    """Control and format characters out (a newline kept), surrounding space trimmed."""
    kept = (c for c in text if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co"))
    return "\n".join(line.rstrip() for line in "".join(kept).replace("\t", " ").split("\n")).strip()


def quoted(text: str) -> str:
    """The person's words as a Markdown quote: no line of it can start a heading of the file."""
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


def _refusal(gateway: Services, user_id: str) -> str | None:
    pc = gateway.config.personas
    if user_id in pc.user_personas:
        return "The operator chooses your personas here (/persona lists them), so you cannot make your own."
    if pc.own_max == 0:
        return "Making your own persona is turned off here; /persona lists the ones you can use."
    mine = owned(gateway.data_dir, on_disk(gateway.data_dir), user_id)
    if len(mine) >= pc.own_max:
        return (f"You have {len(mine)} personas of your own ({', '.join(mine)}); the limit is {pc.own_max}. "
                "Ask the operator to remove one first.")  # fmt: skip
    return None


async def setup_command(gateway: Services, turn: Turn, args: str) -> Reply:
    user, msg = turn.user, turn.message
    assert user is not None
    words = args.split()
    what = words[0].lower() if words else ""
    drafts = _drafts(gateway)
    if what == "cancel":
        gone = drafts.pop(user.user_id, None)
        return _notice("Persona setup cancelled; nothing was made." if gone else "No setup is running.")
    if what != "persona" or len(words) > 1:
        return _notice("Usage: /setup persona (make your own persona), /setup cancel")
    if msg.kind is ConversationKind.GROUP:
        return _notice("Set up your persona in a direct conversation with me: a group reads every answer.")
    refused = _refusal(gateway, user.user_id)
    if refused:
        return _notice(refused)
    drafts.pop(user.user_id, None)
    drafts[user.user_id] = Draft(conversation_key=msg.conversation_key)
    while len(drafts) > MAX_DRAFTS:
        drafts.popitem(last=False)
    return _notice("Let's make a persona of your own, in three steps (/setup cancel stops at any time).\n\n"
                   f"1/3: What should it be called? (a name, up to {MAX_NAME} characters)")  # fmt: skip


def _too_long(text: str, limit: int) -> str | None:
    if len(text) > limit:
        return f"That is {len(text):,} characters; the limit is {limit:,}. Please send a shorter one."
    return None


def answer(gateway: Services, turn: Turn, draft: Draft) -> Reply:
    """The person's next message while ``draft`` waits: the answer to its step."""
    user = turn.user
    assert user is not None
    draft.touched = time.monotonic()
    text = clean(turn.message.text)
    if not text:
        return _notice("Please answer in text (/setup cancel stops).")
    if draft.step == "name":
        title = " ".join(text.split())
        problem = _too_long(title, MAX_NAME)
        if problem:
            return _notice(problem)
        name = dir_name(title, user.user_id)
        if exists(persona_store(gateway, name)):
            return _notice(f"You already have a persona called {name}. Please choose another name.")
        draft.title, draft.step = title, "voice"
        return _notice(f"2/3: How should {title} sound? Describe its voice and style, in your words "
                       f"(up to {MAX_VOICE:,} characters).")  # fmt: skip
    if draft.step == "voice":
        problem = _too_long(text, MAX_VOICE)
        if problem:
            return _notice(problem)
        draft.voice, draft.step = text, "knows"
        return _notice(f"3/3: What should {draft.title} know: about you, or about its job? "
                       f"(up to {MAX_KNOWS:,} characters, or 'skip')")  # fmt: skip
    problem = _too_long(text, MAX_KNOWS)
    if problem:
        return _notice(problem)
    knows = "" if text.lower() in ("skip", "-", "nothing") else text
    _drafts(gateway).pop(user.user_id, None)
    refused = _refusal(gateway, user.user_id)  # the config or another conversation may have changed it
    if refused:
        return _notice(refused)
    try:
        name = create(gateway, user.user_id, draft.title, draft.voice, knows)
    except (PersonaError, MemoryStoreError) as exc:
        return _notice(f"The persona could not be made: {exc}")
    return _notice(f"Made {draft.title} (persona {name}); only you can choose it.\n"
                   f"/persona {name} talks to it here; /persona {name} default everywhere.")  # fmt: skip


def create(gateway: Services, user_id: str, title: str, voice: str, knows: str) -> str:
    """Write the person's persona: the shipped template, the person's voice and knowledge as quoted
    sections of its ``SOUL.md``, and ``OWNER``. Returns its name."""
    name = dir_name(title, user_id)
    store = persona_store(gateway, name)
    source = f"setup-persona:{user_id}"
    if exists(store):
        raise PersonaError(f"a persona called {name} exists already")
    # The owner first: a persona visible for a moment without it would be listed to everyone.
    store.write(OWNER_FILE, user_id + "\n", source=source, trust="user")
    created = bootstrap(store, name, template=TEMPLATE, title=title)
    soul = store.read("SOUL.md").rstrip() if "SOUL.md" in created.files else f"# Soul of {title}"
    parts = [soul, "", "## Voice and style, as your person described it", "", quoted(voice)]
    if knows:
        parts += ["", "## What your person wants you to know", "", quoted(knows)]
    store.write("SOUL.md", "\n".join(parts) + "\n", source=source, trust="user")
    return name
