"""The jobs' git work: what code a job started from (provenance), its worktree and branch (worktree), the
worktree a job works in now (job_trees), reviewing and landing what it did (landing, merging), from inside
an orchestrating job onto its own branch (gathering), and the branches and worktrees left behind (job_branches).

Shared by the runner (mam.agents), the CLI and the dashboard, so it lives below all of them."""
