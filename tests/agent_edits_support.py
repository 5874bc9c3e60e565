"""Scripted turns for a real agent CLI that edits files."""

from __future__ import annotations

from model_servers import Turn


def write_turns(agent: str, name: str) -> list[Turn]:
    """The model's turns for one job: write `name`, then say so (aider: one reply that is the edit)."""
    done = Turn(text=f"Done with {name}")
    match agent:
        case "claude-code":
            return [Turn(tool="Write", args={"file_path": name, "content": f"{name}\n"}), done]
        case "codex":
            return [Turn(tool="exec_command", args={"cmd": f"printf '%s\\n' {name} > {name}"}), done]
        case "gemini":
            return [Turn(tool="write_file", args={"file_path": name, "content": f"{name}\n"}), done]
    return [Turn(text=f"{name}\n```\n{name}\n```\n")]  # aider's whole edit format: the file's name, then its text
