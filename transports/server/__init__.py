"""Serving apps: the app interface, the shared driver, stdio and Streamable HTTP."""
