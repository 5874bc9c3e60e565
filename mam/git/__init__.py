"""The jobs' git work: what code a job started from (provenance), its worktree and branch (worktree),
reviewing and landing what it did (landing), and the branches and worktrees left behind (job_branches).

Shared by the runner (mam.agents), the CLI and the dashboard, so it lives below all of them."""
