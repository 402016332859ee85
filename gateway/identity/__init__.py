"""Who is who: the unified user namespace, and linking two accounts of one person.

Here live the resolution of (channel, account id) to a user id, operator links and user merges
(``users``, the ``gateway.identity.users`` plugin), the link codes with their two-sided confirmation
and guessing budget (``linking``), and the ``/link`` conversation built on them (``link_command``). It
may import ``gateway.state`` (every table goes through it), ``gateway.memory.files`` (a merge moves a
memory tree through the guarded store) and the host's leaf modules; never adapters or plugins.
"""
