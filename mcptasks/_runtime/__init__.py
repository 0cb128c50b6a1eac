"""Running task bodies against a store: the engine, the protocol handlers, input, push, limits.

Private: the public names are re-exported from `mcptasks`. Free of the `mcp` SDK.
"""
