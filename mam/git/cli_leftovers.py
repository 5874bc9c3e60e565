"""The files agent CLIs write for themselves where they run, which the runner's commit of a job's worktree leaves out.

What the runner commits to a job's branch (`worktree.py`, `Worktrees.finish`) is the job's work: the files
the agent made or changed. An agent CLI's own history or cache is not, and once committed it travels with
every `mam merge` into the user's branch. Measured through mam with each pinned CLI against the scripted
model servers (tests/real_agents/test_real_leftovers.py), one job at each level:

- Claude Code 2.1.197, Codex 0.171.0 and Gemini CLI 0.61.0 write nothing into their working directory (their
  sessions, logs and caches go under their home: ~/.claude, ~/.codex, ~/.gemini);
- aider 0.86.2 appends to `.aider.chat.history.md` and `.aider.input.history` (the defaults of its
  --chat-history-file and --input-history-file, at the git root or else the working directory:
  aider/args.py), logs to `.aider.llm.history` when told to (--llm-history-file), and in a git repository
  keeps its repo map's cache in `.aider.tags.cache.v4/` (aider/repomap.py `TAGS_CACHE_DIR`). The built-in
  aider profile sends both histories to /dev/null and runs with --no-git; this list is what keeps them out
  of a branch when a workspace's own profile does not.

The commit leaves these names out anywhere in the worktree, with git's exclude pathspecs: nothing is written
into the repository's shared `info/exclude` or the user's `.gitignore`. A job that changed only these
files committed nothing.
"""

from __future__ import annotations

from typing import Final

LEFT_OUT: Final = (".aider.chat.history.md", ".aider.input.history", ".aider.llm.history", ".aider.tags.cache.v*")
"""File or directory names (glob patterns) no job's commit takes, at any depth."""


def pathspec() -> list[str]:
    """`git status`/`git add` arguments for the whole worktree but `LEFT_OUT` (a name, or anything under it)."""
    return ["--", ".", *(f":(exclude,glob)**/{name}{under}" for name in LEFT_OUT for under in ("", "/**"))]


__all__ = ["LEFT_OUT", "pathspec"]
