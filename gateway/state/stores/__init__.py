"""The stores, named by concept, written once against ``gateway.state.database.Database``.

Each module holds one concept's store(s) and all of its SQL, in the subset both drivers speak
(``gateway.state.database``). ``Stores`` puts one of each on a database: a backend's state
(``gateway.state.sqlite.SqliteState``, ``gateway.state.postgres.PostgresState``) is a ``Stores`` with
that backend's implementations of the two abstract ones, the transcript's full text (``Turns``) and
a person's rows (``People``: the schema catalogue and a final erase).
"""

from __future__ import annotations

from gateway.state.database import Database
from gateway.state.stores.access import Access
from gateway.state.stores.apikeys import ApiKeys
from gateway.state.stores.approvals import ApprovalAudit
from gateway.state.stores.knowledge import Knowledge
from gateway.state.stores.links import LinkRequests
from gateway.state.stores.outbox import Outbox
from gateway.state.stores.people import People
from gateway.state.stores.personas import PersonaChoices
from gateway.state.stores.progress import DistillRuns, RetentionCutoffs, SleepRuns, Watermarks, WriterProgress
from gateway.state.stores.sessions import Conversations, Dedupe, Sessions
from gateway.state.stores.transcript import Compactions, TurnContexts, Turns
from gateway.state.stores.usage import Usage
from gateway.state.stores.users import Identities, Users
from gateway.state.stores.websessions import WebSessions

__all__ = ["Stores"]


class Stores:
    """Every store of ``gateway.state.State`` on one database (``tx``/``close`` are the backend's)."""

    def __init__(self, db: Database, *, turns: Turns, people: People) -> None:
        self.users = Users(db)
        self.identities = Identities(db)
        self.links = LinkRequests(db)
        self.sessions = Sessions(db)
        self.turns = turns
        self.compactions = Compactions(db)
        self.conversations = Conversations(db)
        self.dedupe = Dedupe(db)
        self.access = Access(db)
        self.knowledge = Knowledge(db)
        self.watermarks = Watermarks(db)
        self.writer_progress = WriterProgress(db)
        self.sleep_runs = SleepRuns(db)
        self.distill_runs = DistillRuns(db)
        self.retention = RetentionCutoffs(db)
        self.people = people
        self.turn_contexts = TurnContexts(db)
        self.persona_choices = PersonaChoices(db)
        self.web_sessions = WebSessions(db)
        self.outbox = Outbox(db)
        self.api_keys = ApiKeys(db)
        self.usage = Usage(db)
        self.approval_audit = ApprovalAudit(db)
