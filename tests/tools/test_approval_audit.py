"""The approval audit's store (``State.approval_audit``, gateway/state/approvals.py) on SQLite and on
PostgreSQL: steps written and read newest first with filters and pages, a waiting request closed by its
answer, expiry audited once whoever sweeps, two people merged, and the retention by age and count."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gateway.state import State
from gateway.state.approvals import ApprovalEvent

T0 = datetime(2026, 11, 1, 9, 0, tzinfo=UTC)
M = timedelta(minutes=1)


def _step(at: datetime, approval_id: str, outcome: str, *, user: str = "ann", tool: str = "mail_send",
          note: str = "") -> ApprovalEvent:  # fmt: skip
    return ApprovalEvent(at=at, approval_id=approval_id, user_id=user, tool=tool, outcome=outcome,
                         summary=f"Send the mail of {approval_id}", note=note)  # fmt: skip


def _outcomes(events: list[ApprovalEvent]) -> list[tuple[str, str]]:
    return [(e.approval_id, e.outcome) for e in events]


def test_steps_are_read_newest_first_by_person_and_outcome_page_by_page(any_state: State) -> None:
    audit = any_state.approval_audit
    assert audit.record(_step(T0, "a1", "requested"), expires_at=T0 + 10 * M)
    assert audit.record(_step(T0 + M, "a1", "refused", user="ann", note="another person answered"))
    assert audit.record(_step(T0 + 2 * M, "a1", "approved"), closes=True)
    assert audit.record(_step(T0 + 2 * M, "a1", "done"))
    assert audit.record(_step(T0 + 3 * M, "b1", "requested", user="bo", tool="calendar_change"), expires_at=T0 + 9 * M)
    assert audit.record(_step(T0 + 4 * M, "b1", "denied", user="bo", tool="calendar_change"), closes=True)

    every = audit.page()
    assert _outcomes(every) == [("b1", "denied"), ("b1", "requested"), ("a1", "done"), ("a1", "approved"),
                                ("a1", "refused"), ("a1", "requested")]  # fmt: skip
    assert [e.entry_id for e in every] == sorted((e.entry_id for e in every), reverse=True)
    first = every[-1]
    assert first.at == T0 and first.summary == "Send the mail of a1" and first.tool == "mail_send"
    assert every[-2].note == "another person answered"
    assert _outcomes(audit.page(user_id="bo")) == [("b1", "denied"), ("b1", "requested")]
    assert _outcomes(audit.page(outcome="requested")) == [("b1", "requested"), ("a1", "requested")]
    assert _outcomes(audit.page(user_id="ann", outcome="denied")) == []
    page1 = audit.page(limit=4)
    page2 = audit.page(limit=4, before=page1[-1].entry_id)
    assert _outcomes(page1 + page2) == _outcomes(every) and len(page2) == 2
    # Both were answered: nothing waits, nothing expires.
    assert audit.next_expiry() is None and audit.expire_due(T0 + 60 * M) == []


def test_an_expiry_is_audited_once_whoever_sweeps(any_state: State) -> None:
    audit = any_state.approval_audit
    audit.record(_step(T0, "x1", "requested"), expires_at=T0 + 10 * M)
    audit.record(_step(T0, "x2", "requested"), expires_at=T0 + 20 * M)
    assert audit.next_expiry() == T0 + 10 * M
    assert audit.expire_due(T0 + 5 * M) == []
    [expired] = audit.expire_due(T0 + 10 * M)
    assert (expired.approval_id, expired.outcome, expired.at) == ("x1", "expired", T0 + 10 * M)
    assert audit.expire_due(T0 + 11 * M) == [], "audited once"
    assert audit.next_expiry() == T0 + 20 * M
    # The process that held x2 notices its expiry after another process's sweep did: written once.
    assert [e.approval_id for e in audit.expire_due(T0 + 30 * M)] == ["x2"]
    assert not audit.record(_step(T0 + 30 * M, "x2", "expired"), closes=True)
    assert _outcomes(audit.page(outcome="expired")) == [("x2", "expired"), ("x1", "expired")]
    assert audit.next_expiry() is None


def test_a_merge_moves_the_steps_and_retention_keeps_days_and_rows(any_state: State) -> None:
    audit = any_state.approval_audit
    for i in range(6):
        audit.record(_step(T0 + i * timedelta(days=1), f"r{i}", "denied", user="bo" if i % 2 else "ann"))
    audit.record(_step(T0, "w1", "requested"), expires_at=T0 + 10 * M)  # still waiting: never pruned
    assert audit.merge(into="ann", source="bo") == 3
    assert {e.user_id for e in audit.page()} == {"ann"}

    assert audit.prune(before=T0 + timedelta(days=2), keep=100, limit=500) == 2  # r0, r1
    assert [e.approval_id for e in audit.page()] == ["w1", "r5", "r4", "r3", "r2"]
    assert audit.prune(before=T0, keep=2, limit=1) == 1, "a batch at a time"
    assert audit.prune(before=T0, keep=2, limit=500) == 2
    assert [e.approval_id for e in audit.page()] == ["w1", "r5"], "the newest two"
    assert audit.prune(before=T0 + timedelta(days=30), keep=0, limit=500) == 1
    assert [e.approval_id for e in audit.page()] == ["w1"]
