"""The directories of `mam-agent --worktree`'s jobs, made and checked without following a link.

Nothing under `.mam/worktrees/` is followed: an earlier job could have planted a link there (at
`.gitignore`, or at the next job's name). The worktrees dir, the `.gitignore` in it and each job's directory
are made relative to a descriptor (`mam.registry.nofollow`), so a name already taken makes that job fail
with the path named; before git runs in, or removes, a job's directory, `check_made` makes sure with `lstat`
that the name is still that directory (same device and inode). Used by `worktree.Worktrees`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mam.git.run import GitError as WorktreeError
from mam.registry import file_modes
from mam.registry.nofollow import NOFOLLOW, PathRefused, open_at, open_dir_at, refuse_other_at


def make_job_dir(mam_dir: Path, worktrees: Path, job_id: str, path: Path) -> tuple[int, int]:
    """Make `.mam/worktrees/`, its `.gitignore` and the job's empty directory, following no link
    inside `.mam`; the job directory's (device, inode)."""
    file_modes.make_dirs(mam_dir.parent)
    try:
        os.mkdir(mam_dir, file_modes.dir_mode())
    except FileExistsError:
        pass
    try:
        try:
            mam_fd = os.open(mam_dir, os.O_RDONLY | os.O_DIRECTORY | NOFOLLOW)
        except (NotADirectoryError, OSError) as exc:
            if isinstance(exc, FileNotFoundError) or not os.path.islink(mam_dir):
                raise WorktreeError(f"cannot make a worktree for job {job_id}: {mam_dir}: {exc.strerror}") from None
            raise WorktreeError(
                f"cannot make a worktree for job {job_id}: refusing to write through a symlink "
                f"at {mam_dir} (it appeared after the runner started)"
            ) from None
        try:
            try:
                os.mkdir("worktrees", file_modes.dir_mode(), dir_fd=mam_fd)
            except FileExistsError:
                pass  # ours from before, or planted: opening it says which
            fd = open_dir_at(mam_fd, "worktrees", shown=str(worktrees))
        finally:
            os.close(mam_fd)
        try:
            _ignore(fd, worktrees)
            try:
                os.mkdir(path.name, file_modes.dir_mode(), dir_fd=fd)
            except FileExistsError:
                raise WorktreeError(
                    f"cannot make a worktree for job {job_id}: {path} already exists ({what(fd, path.name)}); "
                    "mam makes that directory itself and follows nothing there: remove it"
                ) from None
            st = os.stat(path.name, dir_fd=fd, follow_symlinks=False)
        finally:
            os.close(fd)
    except PathRefused as exc:
        raise WorktreeError(f"cannot make a worktree for job {job_id}: {exc}") from None
    return st.st_dev, st.st_ino


def _ignore(fd: int, worktrees: Path) -> None:
    """`.gitignore` (`*`) in the worktrees dir, so they never show in the user's `git status`."""
    shown = str(worktrees / ".gitignore")
    try:
        out = open_at(fd, ".gitignore", os.O_WRONLY | os.O_CREAT | os.O_EXCL, shown=shown)
    except FileExistsError:
        refuse_other_at(fd, ".gitignore", shown=shown)  # a link or a fifo there: refused, named
        return
    with os.fdopen(out, "w") as f:
        f.write("*\n")


def check_made(job_id: str, path: Path, made: tuple[int, int], action: str) -> None:
    """`WorktreeError` unless `path` is still the very directory the runner made (never followed)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        raise WorktreeError(f"job {job_id}: refusing to {action} {path}: it is gone") from None
    if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != made:
        now = describe(st.st_mode, path)
        raise WorktreeError(
            f"job {job_id}: refusing to {action} {path}: it is no longer the directory mam made ({now})"
        )


def describe(mode: int, path: Path) -> str:
    if stat.S_ISLNK(mode):
        try:
            return f"a symlink to {os.readlink(path)}"
        except OSError:
            return "a symlink"
    return "a directory, but another one" if stat.S_ISDIR(mode) else "not a directory"


def what(dir_fd: int, name: str) -> str:
    """What is at `name` in `dir_fd`, in words (a link says where it points)."""
    try:
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except OSError:
        return "something"
    if stat.S_ISLNK(mode):
        try:
            return f"a symlink to {os.readlink(name, dir_fd=dir_fd)}"
        except OSError:
            return "a symlink"
    return "a directory" if stat.S_ISDIR(mode) else "a file"


__all__ = ["check_made", "describe", "make_job_dir", "what"]
