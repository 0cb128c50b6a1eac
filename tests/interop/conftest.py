"""Other implementations against our servers: the official conformance suite and the MCP Inspector CLI."""
