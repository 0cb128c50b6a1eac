"""Other implementations against our servers: the official conformance suite, the MCP Inspector CLI
(with its TypeScript tasks client) and agent frameworks' MCP clients (Strands Agents, pydantic-ai)."""
