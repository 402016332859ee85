"""Who this node is: ``cluster.node_id``, or ``<hostname>-<pid>`` (unique per process and machine)."""

from __future__ import annotations

import os
import re
import socket
from pathlib import Path

from gateway.config import Config


def node_id(config: Config) -> str:
    """The configured id, else host name and pid: two processes on one machine never share one."""
    if config.cluster.node_id:
        return config.cluster.node_id
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:40] or "node"
    return f"{host}-{os.getpid()}"


def node_dir(config: Config) -> Path:
    """Where this node keeps files no other node may touch: ``<data_dir>/nodes/<node_id>/`` in a
    cluster (the shared volume holds every node's), the data directory itself with one node."""
    data = Path(config.data_dir)
    return data / "nodes" / node_id(config) if config.cluster.enabled else data


def embedded_index_dir(config: Config) -> Path:
    """The embedded Qdrant index: ``<data_dir>/qdrant``, or per node in a cluster (rebuilt from the
    shared Markdown by that node; a Qdrant server, ``memory.qdrant_url``, is shared instead)."""
    return node_dir(config) / "qdrant"
