"""What the official conformance suite runs against mrtr."""
