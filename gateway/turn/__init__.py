"""The turn protocol: one message in, one reply out, and what a turn leaves behind.

``protocol`` is the default ``gateway_handle_turn`` and lists the steps in order; the others are one
step each: ``admission`` (who may reach the model: DM policy, pairing, invites), ``dedupe``,
``sessions`` (the live conversation per scope), ``commands`` and ``command_registry`` (``/new``,
``/help``...), ``tiers`` (how much memory a turn loads), ``budget`` (the prompt budgeter),
``record`` (what the model saw, kept per turn), ``explain`` (the same for a message not yet sent),
``gate`` (background CPU work gives way to turns), and, when the transcript cannot take an answered
turn, ``writefailures``, ``spool`` and ``writeback``. docs/architecture.md, "The turn".
"""
