"""Broker connections and following: MQTT clients (TLS, failover across a cluster, an inbox that
loses nothing), live job and runner states, following a job's output, the projector's announcement.

Builds on mam.contract and mam.registry."""
