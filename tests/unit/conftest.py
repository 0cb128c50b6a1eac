"""The engine, authoring and protocol layers in process, on asyncio and trio: no SDK, no network."""
