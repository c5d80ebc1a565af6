"""The admin REST API (aiohttp); reads the store, writes only through the store."""
