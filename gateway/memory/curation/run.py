"""One curation run end to end, and its undo.

Order of effects, chosen so a crash at any point leaves something rollback understands:
backup of the pre-run text -> audit records (with pre/post hashes) -> the file itself. A crash
before the file write leaves the file at its pre-run hash, which rollback reports as nothing to do.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from gateway.memory.curation import audit
from gateway.memory.curation.doc import parse, serialize
from gateway.memory.curation.ops import apply_ops, changed
from gateway.memory.curation.types import Admit, Applied, Rails, Rejected, Screen, Writer

SOURCE = "curation"


@dataclass(frozen=True, slots=True, kw_only=True)
class CurationResult:
    run_id: str
    written: bool
    applied: tuple[Applied, ...]
    rejected: tuple[Rejected, ...]
    pre_sha256: str
    post_sha256: str
    backup: str = ""


RollbackStatus = Literal["restored", "already_restored", "nothing_to_undo", "conflict", "unknown_run", "no_backup"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RollbackResult:
    run_id: str
    status: RollbackStatus
    detail: str = ""


def _now(now: datetime | None) -> str:
    return (now or datetime.now(UTC)).astimezone(UTC).isoformat()


def curate(
    store: Writer,
    ops: Any,
    *,
    rel: str = "USER.md",
    rails: Rails | None = None,
    screen: Screen | None = None,
    run_id: str | None = None,
    now: datetime | None = None,
    source: str = SOURCE,
    admit: Admit | None = None,
    seed: str = "",
    message_id: str = "",
    trust: str = "system",
) -> CurationResult:
    """Apply ``ops`` (parsed model JSON) to ``rel`` through ``store``. Store errors propagate (the
    job retries); model garbage does not raise, it is rejected op by op. ``seed``: the text a file
    that does not exist yet starts from (a title); ``message_id`` and ``trust``: the provenance of
    the write in the store's audit."""
    run_id = run_id or uuid.uuid4().hex
    ts = _now(now)
    pre_exists = store.exists(rel)
    before = store.read(rel) if pre_exists else ""
    doc, applied, rejected = apply_ops(parse(before if pre_exists else seed), ops, rails, screen=screen, admit=admit)
    written = changed(applied)
    after = serialize(doc) if written else before
    backup = audit.save_backup(store, rel, before, source=source) if written else ""
    records: list[dict[str, Any]] = [
        {"type": "op", "run_id": run_id, "ts": ts, "index": a.index, "op": a.op, "outcome": a.outcome,
         "reason": "", "before": a.before, "after": a.after}
        for a in applied
    ]  # fmt: skip
    records += [
        {"type": "op", "run_id": run_id, "ts": ts, "index": r.index, "op": r.op, "outcome": "rejected",
         "reason": r.reason, "before": "", "after": ""}
        for r in rejected
    ]  # fmt: skip
    records.sort(key=lambda r: int(r["index"]))
    records.append(
        {"type": "run", "run_id": run_id, "ts": ts, "file": rel, "written": written, "pre_exists": pre_exists,
         "pre_sha256": audit.sha256_text(before), "post_sha256": audit.sha256_text(after), "backup": backup,
         "applied": len(applied), "rejected": len(rejected)}
    )  # fmt: skip
    audit.append_records(store, rel, records, source=source)
    if written:
        store.write(rel, after, source=source, message_id=message_id, trust=trust)
    return CurationResult(
        run_id=run_id,
        written=written,
        applied=tuple(applied),
        rejected=tuple(rejected),
        pre_sha256=audit.sha256_text(before),
        post_sha256=audit.sha256_text(after),
        backup=backup,
    )


def rollback(
    store: Writer, run_id: str, *, rel: str = "USER.md", force: bool = False, now: datetime | None = None
) -> RollbackResult:
    """Restore ``rel`` to exactly what it was before run ``run_id``.

    Refuses (``conflict``) when the file changed after that run, since restoring would silently drop
    the later edits; ``force=True`` restores anyway. The rollback itself is audited.
    """
    runs = (r for r in audit.read_records(store, rel) if r.get("type") == "run" and r.get("run_id") == run_id)
    run = next(runs, None)
    if run is None:
        return RollbackResult(run_id=run_id, status="unknown_run", detail="no such run in the audit")
    if not run.get("written"):
        return RollbackResult(run_id=run_id, status="nothing_to_undo", detail="that run changed nothing")
    current = store.read(rel) if store.exists(rel) else ""
    current_sha = audit.sha256_text(current)
    if current_sha == run["pre_sha256"]:
        return RollbackResult(run_id=run_id, status="already_restored")
    if current_sha != run["post_sha256"] and not force:
        return RollbackResult(run_id=run_id, status="conflict", detail=f"{rel} changed after run {run_id}")
    backup = str(run.get("backup", ""))
    text = store.read(backup) if backup and store.exists(backup) else None
    if text is None or audit.sha256_text(text) != run["pre_sha256"]:
        return RollbackResult(run_id=run_id, status="no_backup", detail=f"backup {backup!r} missing or altered")
    audit.append_records(
        store,
        rel,
        [{"type": "rollback", "run_id": run_id, "ts": _now(now), "file": rel, "from_sha256": current_sha,
          "to_sha256": run["pre_sha256"], "forced": force and current_sha != run["post_sha256"]}],
        source=f"{SOURCE}-rollback",
    )  # fmt: skip
    delete = getattr(store, "delete", None)
    if not run.get("pre_exists", True) and callable(delete):
        delete(rel, source=f"{SOURCE}-rollback")  # the run created the file: undoing it removes it
    else:
        store.write(rel, text, source=f"{SOURCE}-rollback")
    return RollbackResult(run_id=run_id, status="restored")
