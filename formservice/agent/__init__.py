"""The agent (MCP) endpoint's tool catalog and guides; the HTTP binding is
:mod:`formservice.mcp`."""
