"""The face: what users call, the `logicroute` commands, the HTTP server and MCP; above the core."""
