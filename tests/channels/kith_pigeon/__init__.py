"""A third-party channel, written as a plugin outside kith would be: "pigeon", a toy platform that
posts messages to a webhook and takes replies into its loft.

It touches nothing in ``gateway/``: its section ``channels.pigeon`` is declared by ``config`` (in the
``kith.config`` entry-point group, loaded whenever a config is read) and its adapter is registered by
``plugin`` (in the ``kith`` group, loaded at start). tests/channels/test_third_party_channel.py
installs it as a distribution with those two entry points.
"""
