"""mrtr_transports: trio adapters (stdio, Streamable HTTP, WebSocket) that drive mrtr_core.

Empty until the transport issues land; installed under this collision-free name.
"""
