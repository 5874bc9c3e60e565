"""The contract every part of mam shares: ids, topics, events and their schema, the job record and the
pure fold, presence and signed states, the workspace's paths, broker addresses, errors.

Imports nothing from the rest of mam: the registry readers, the clients, the CLI and the packages
above (broker, projector, agents, web, mcp_server) build on it."""
