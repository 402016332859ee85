"""Proactive delivery: one durable outbox, routing, missed messages, quiet hours (docs/proactive.md)."""
