"""The ``mrtr`` command: serve, call, state inspect."""
