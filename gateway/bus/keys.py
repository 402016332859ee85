"""Redis key layout. One place, so ``kith jobs`` and the workers can never disagree.

``<p>:q:<name>``     stream per job name (consumer group ``workers``)
``<p>:dead:<name>``  dead-letter stream per job name
``<p>:job:<id>``     hash: the job record while it is queued, delayed, running or backing off;
                     its existence is what makes ``enqueue(job_id=...)`` idempotent
``<p>:delayed``      sorted set of job ids by due time (ms), for delays and retry backoff
``<p>:queues``       set of job names ever enqueued, so status finds queues without SCAN
``<p>:cron``         hash ``<job>|<user>`` -> last fired local slot, shared by every scheduler
"""

from __future__ import annotations

from dataclasses import dataclass

GROUP = "workers"


@dataclass(frozen=True, slots=True)
class Keys:
    prefix: str = "kith"

    def stream(self, name: str) -> str:
        return f"{self.prefix}:q:{name}"

    def dead(self, name: str) -> str:
        return f"{self.prefix}:dead:{name}"

    def job(self, job_id: str) -> str:
        return f"{self.prefix}:job:{job_id}"

    @property
    def delayed(self) -> str:
        return f"{self.prefix}:delayed"

    @property
    def queues(self) -> str:
        return f"{self.prefix}:queues"

    @property
    def cron(self) -> str:
        return f"{self.prefix}:cron"
