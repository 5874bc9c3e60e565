"""Reading what lies under a workspace's `.mam/`: the registry and audit log, the archive of pruned
jobs, the query index, the runtime file and the projector's lock, opened without following links.

Builds on mam.contract only; the projector writes these files, everything here reads them (and the
runtime file, which `mam up` writes through it)."""
