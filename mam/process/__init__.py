"""What every mam process shares, below any command line: argument types and the workspace and broker
options (`args`, `options`), logging and the exit-code wrapper (`running`), the /metrics endpoint
(`metrics`). The daemons (mam-broker, mam-projector, mam-agent), the dashboard, the MCP server and
`mam` itself build on it; it imports nothing of theirs."""
