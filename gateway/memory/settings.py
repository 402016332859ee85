"""The memory wing's settings (``memory:`` in config.yaml): the store, recall and its filter tier.

Owned by ``gateway.memory`` (docs/memory.md); the host's ``Config`` only places the section. Built on
``gateway.configtypes`` alone, so reading a config imports nothing of the memory code.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from gateway.configtypes import ModelRole, Section


class FilterTierConfig(Section):
    """The recall filter tier (docs/memory.md): one model call keeps and orders the recalled candidates."""

    # auto: on when the ``backend`` role is configured under llm.roles (a cheap or local model of its own);
    # on: whenever the role has a model; off: never.
    enabled: Literal["auto", "on", "off"] = "auto"
    backend: ModelRole = "cheap"  # checked at load like every ModelRole field
    deadline_ms: int = Field(800, ge=50, le=10_000)  # past this the hybrid ranking is used as it was
    candidates: int = Field(16, ge=1, le=50)  # top hybrid hits shown to the model
    max_tokens: int = Field(64, ge=8, le=1000)
    # A model that misses the deadline this many calls in a row is not asked for ``stand_down_s``
    # (0: always ask). Each missed call costs the turn the whole deadline, and on a local server with one
    # slot the abandoned call also holds up the answer queued behind it.
    stand_down_after: int = Field(3, ge=0, le=100)
    stand_down_s: float = Field(600, ge=1, le=86_400)


class MemoryConfig(Section):
    """Memory store and recall (owned by gateway.memory; see docs/memory.md)."""

    max_file_bytes: int = Field(256 * 1024, ge=1024)
    # Sanity cap (seed 001): a new file is refused once its directory holds this many (DirectoryFullError).
    max_dir_files: int = Field(10_000, ge=10)
    # Re-index files edited by hand (an editor, git pull, a sync tool) within ~2 s (memory/files/watch.py).
    watch_files: bool = True
    # Offline ONNX models shipped in wheels; chosen by measurement on LoCoMo (docs/benchmarks.md).
    embedding_model: Literal["minilm-l6-int8", "e5-small-q4"] = "minilm-l6-int8"
    # Texts embedded at once, one thread each: 2 meets the ingest goal on a 2-core machine (docs/benchmarks.md).
    embedding_threads: int = Field(2, ge=1, le=64)
    # None = embedded Qdrant under <data_dir>/qdrant; "http(s)://host:6333" = a Qdrant server;
    # ":memory:" = qdrant-client's in-process mode (tests only: slow at scale).
    qdrant_url: str | None = None
    qdrant_api_key: SecretStr | None = None
    search_threads: int = Field(1, ge=1, le=64)
    recency_half_life_days: float = Field(180, ge=0)  # 0 disables recency decay
    recency_weight: float = Field(0.25, ge=0, le=1)  # share of a hit's score subject to decay
    dense_weight: float = Field(0.4, ge=0)
    sparse_weight: float = Field(0.6, ge=0)
    recall_candidates: int = Field(50, ge=1, le=1000)  # per retriever, before fusion
    neighbor_weight: float = Field(0.6, ge=0, le=1)  # a turn inherits this share of a nearby turn's score
    neighbor_window_s: float = Field(120, ge=0)  # nearby = same session, at most this many seconds apart
    # Query signals (docs/memory.md#ranking): added to a turn whose speaker the query names, and to a
    # memory dated inside a time the query names ("yesterday", "last summer", "in May"), in the
    # person's zone. Chosen by the leave-one-out search of `kith bench locomo` (docs/benchmarks.md).
    speaker_weight: float = Field(0.6, ge=0, le=2)
    date_weight: float = Field(0.2, ge=0, le=2)
    # A hit loses this much per better-ranked hit of its own session (spreads multi-evidence answers).
    session_diversity: float = Field(0.0, ge=0, le=1)
    bm25_avg_len: float = Field(64, gt=0)
    recall_k: int = Field(8, ge=0, le=100)
    # One deadline for the turn's whole memory read (seed 001): the people lookup, hybrid recall and
    # the filter tier share it; the filter's own deadline_ms is cut to what the others left.
    read_deadline_ms: int = Field(2000, ge=50, le=30_000)
    recall_budget_tokens: int = Field(600, ge=0)
    # Groups recall from the group's own memory only; True also searches the speaker's private memory.
    group_private_recall: bool = False
    # Session-start injection (docs/memory.md): WORKING.md expires this long after its last update,
    # and is capped to this many tokens when compaction writes it.
    working_ttl_days: float = Field(14, gt=0)
    working_max_tokens: int = Field(1000, ge=100)
    proactive_session_greeting: bool = False  # first turn: acknowledge what the user was working on
    # Groups never see a member's USER.md/PATTERNS.md/people notes unless this is true.
    group_private_profile: bool = False
    people_file_tokens: int = Field(800, ge=50)  # per people/ file in the prompt
    people_recent_participants: int = Field(5, ge=0, le=50)
    # Session-start injection of the dated memories (memories/YYYY-MM-DD.md of the sleep cycle): the
    # last N days (0 = off), in one section capped at this many tokens, trimmed with the digests.
    dated_days: int = Field(3, ge=0, le=60)
    dated_budget_tokens: int = Field(800, ge=50)
    # Playbooks (playbooks/*.md in the person's tree): at most this many, the most relevant to the
    # message, in one section of this many tokens, the last trimmable section to be cut (docs/memory.md).
    playbooks_k: int = Field(3, ge=0, le=20)
    playbooks_budget_tokens: int = Field(800, ge=50)
    filter_tier: FilterTierConfig = Field(default_factory=FilterTierConfig)
    # Below this much free space on the index's filesystem, index writes (and opening the embedded
    # index) pause instead of risking a SIGBUS in Qdrant's memory-mapped files (docs/memory.md); 0 = off.
    min_free_mb: int = Field(256, ge=0)
    disk_check_s: float = Field(10.0, gt=0)  # how often free space is re-checked (resume, /healthz)
