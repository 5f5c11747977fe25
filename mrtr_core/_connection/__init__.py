"""The connection's parts (not part of the public API).

``Connection``, its roles, session states and events are public at the top level
of ``mrtr_core``; the modules here are its implementation: bounds and options,
the session table, the inbox, the handshake, the call and request tables.  See
``docs/connection.md``.
"""
