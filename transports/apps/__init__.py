"""Server apps: the McpApp registry, the continuation store, the example app."""
