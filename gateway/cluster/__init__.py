"""Several gateway nodes on one Redis and one state database (docs/architecture.md#several-nodes).

``node.py`` names this process; ``lease.py`` is the Redis lease with a fencing token that makes exactly
one node the scheduler; ``locks.py`` holds the distributed locks (a person's turn, a memory file's
write); ``role.py`` (``Cluster``) ties them to the gateway: ``gw.cluster.is_leader()``,
``on_leader(start, stop)``, ``turn_lock(scope)``. Imports only ``gateway.config`` and redis.
"""

from gateway.cluster.lease import Lease
from gateway.cluster.locks import LockTimeout, redis_lock
from gateway.cluster.node import node_id

__all__ = ["Lease", "LockTimeout", "node_id", "redis_lock"]
