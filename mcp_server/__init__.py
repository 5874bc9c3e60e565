"""mam.mcp_server: `mam mcp`, the workspace's jobs as Model Context Protocol tools for agents.

A face like the CLI and the dashboard: its tools call the Publisher (confirmed
writes, waits) over one shared broker connection, and the query and reading
modules for everything read.
"""
