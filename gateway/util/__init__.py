"""Small helpers with no knowledge of the gateway (text splitting, safe display text, JSON lines, log
throttling, heap trimming, disk space): each imports only the standard library, so any layer may use
them. docs/architecture.md, "Utilities".
"""
