"""The client and its links (stdio child process, Streamable HTTP endpoint)."""
