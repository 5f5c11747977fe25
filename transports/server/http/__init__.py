"""Streamable HTTP serving: access policy, header rules and the h11 exchange."""
