"""A job's limits, without brokers: the CLI arguments they become per profile (`job_args`), the budget's
words (`job_limits`), and what a tree has spent and what that refuses and cancels (`tree_budget`)."""

from __future__ import annotations

import argparse
import re

import msgspec
import pytest
from msgspec.structs import replace

from mam.agents.job_args import job_arguments, with_options
from mam.agents.permissions import with_level
from mam.agents.profiles import builtin_profiles, render
from mam.agents.retrying import resubmission
from mam.cli.option_flags import add_option_flags, option_values
from mam.contract import events as ev
from mam.contract import tree_budget
from mam.contract.fold import Context, apply
from mam.contract.job_limits import FIELDS as RESUMED
from mam.contract.job_limits import over_budget
from mam.contract.job_options import NAMES as OPTIONS
from mam.contract.record import JobRecord, Status

pytestmark = pytest.mark.fast


FIELDS = (*RESUMED, *OPTIONS)
"""The `submitted` fields the record keeps under the same names, each left out unless given."""


def submitted(**fields: object) -> JobRecord:
    record = apply(None, ev.Submitted(prompt="p", agent="claude-code", **fields), Context("j1", "w", "e1", "t"))
    assert isinstance(record, JobRecord)
    return record


def argv_for(profile: str, record: JobRecord) -> list[str] | str:
    chosen = builtin_profiles()[profile]
    own = job_arguments(record, chosen.options, runner="r1")
    if isinstance(own, str):
        return own
    levels = chosen.permissions or {}
    base = render(with_level(chosen.argv, levels.get("edit", [])), job_id="j1", workspace="w")
    return with_options(base, own[0])


def test_the_fold_keeps_each_given_limit_and_leaves_the_others_out() -> None:
    record = submitted(model="opus", max_turns=5, budget_tokens=10_000, tree_budget_usd=2.5)
    assert (record.model, record.max_turns, record.budget_tokens, record.tree_budget_usd) == ("opus", 5, 10_000, 2.5)
    assert set(msgspec.to_builtins(submitted())).isdisjoint(FIELDS)  # none given: the record's bytes as before
    assert set(msgspec.to_builtins(ev.Submitted(prompt="p", agent="a"))).isdisjoint(FIELDS)


def test_each_profile_passes_model_turns_and_resume_as_its_cli_documents() -> None:
    job = submitted(model="opus", max_turns=4, budget_usd=0.5, resumes="j0", resume_session="s-1")
    assert argv_for("claude-code", job) == [
        "claude",
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--include-partial-messages",
        "--permission-mode",
        "acceptEdits",
        "--model",
        "opus",
        "--max-turns",
        "4",
        "--max-budget-usd",
        "0.5",
        "--resume",
        "s-1",
    ]
    # codex: options between `exec` and `resume`, the prompt's `-` last; no turn limit or budget flag (left out)
    edit = [
        "--sandbox",
        "workspace-write",
        "-c",
        "sandbox_workspace_write.exclude_slash_tmp=true",
        "-c",
        "sandbox_workspace_write.exclude_tmpdir_env_var=true",
    ]  # nothing under /tmp but its own directory
    assert argv_for("codex", job) == [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        *edit,
        "--model",
        "opus",
        "resume",
        "s-1",
        "-",
    ]
    assert argv_for("gemini", job)[-4:] == ["--model", "opus", "--resume", "s-1"]
    assert argv_for("codex", submitted()) == ["codex", "exec", "--json", "--skip-git-repo-check", *edit, "-"]
    assert argv_for("aider", submitted(model="openai/gpt-5")) == [
        "aider",
        "--yes-always",
        "--no-git",
        "--no-check-update",
        "--no-show-release-notes",
        "--no-analytics",
        "--no-detect-urls",
        "--no-suggest-shell-commands",
        "--no-pretty",
        "--chat-history-file",
        "/dev/null",
        "--input-history-file",
        "/dev/null",
        "--model",
        "openai/gpt-5",
        "--message-file",
        "/dev/stdin",
    ]


def test_a_job_asking_what_its_command_cannot_pass_fails_with_the_reason() -> None:
    why = argv_for("shell", submitted(resumes="j0", resume_session="s-1"))
    assert isinstance(why, str) and "to resume agent session s-1" in why and "runner r1" in why
    why = argv_for("aider", submitted(resumes="j0", resume_session="s-1"))
    assert isinstance(why, str) and "to resume agent session s-1" in why
    assert argv_for("shell", submitted(max_turns=3)) == ["sh", "-s"]  # a turn limit it lacks is left out


def test_over_budget_names_the_budget_and_what_was_used() -> None:
    job = submitted(budget_tokens=10_000, budget_usd=1.0)
    assert over_budget(job, ev.Usage(input_tokens=9_000, output_tokens=1_000)) is None
    assert (
        over_budget(job, ev.Usage(input_tokens=12_000, output_tokens=345)) == "budget 10000 tokens exceeded: 12345 used"
    )
    assert over_budget(job, ev.Usage(cost_usd=1.25)) == "budget $1.00 exceeded: $1.25 used"
    assert over_budget(job, None) is None


def job(
    job_id: str,
    *,
    parent: str | None = None,
    status: Status = Status.SUCCEEDED,
    tokens: int | None = None,
    cost: float | None = None,
    **limits: object,
) -> JobRecord:
    record = JobRecord(
        job_id=job_id,
        workspace="w",
        status=status,
        agent="a",
        prompt="p",
        parent=parent,
        submitted_at="t",
        updated_at="t",
        **limits,
    )  # type: ignore[arg-type]
    if tokens is not None or cost is not None:
        record = replace(
            record, usage=ev.Usage(input_tokens=tokens, output_tokens=0 if tokens else None, cost_usd=cost)
        )
    return record


def test_a_tree_that_reached_its_budget_refuses_below_it_and_cancels_its_unfinished_jobs() -> None:
    records = {
        r.job_id: r
        for r in [
            job("root", status=Status.RUNNING, tree_budget_usd=1.0, tokens=999_999, cost=50.0),  # its own: not counted
            job("a", parent="root", cost=0.4),
            job("b", parent="a", cost=0.3, status=Status.CANCELLED),
            job("c", parent="a", status=Status.RUNNING),
            job("d", parent="root", status=Status.SUBMITTED),
        ]
    }
    tree = {"root": {"a", "d"}, "a": {"b", "c"}}
    assert tree_budget.spent("root", tree, records.get) == tree_budget.Spent(0, 0.7)
    assert tree_budget.refusal("new", "c", lambda _: tree, records.get) is None
    assert tree_budget.derive(records.values(), lambda _: tree, records.get) == []

    records["e"] = job("e", parent="c", cost=0.3)
    tree["c"] = {"e"}
    reason = "tree budget of root reached: $1.00 of $1.00 spent"
    assert (
        tree_budget.refusal("new", "c", lambda _: tree, records.get)
        == f"{reason}; no new jobs under it (job 'new' refused)"
    )
    derived = tree_budget.derive([records["e"]], lambda _: tree, records.get)
    assert [(j, e.reason) for j, e in derived] == [("d", reason), ("c", reason)]  # nearest first; not the root


def test_mam_retry_carries_the_limits_and_the_resumed_session() -> None:
    limits = {
        "model": "opus",
        "max_turns": 4,
        "budget_tokens": 9,
        "budget_usd": 0.5,
        "tree_budget_tokens": 7,
        "tree_budget_usd": 2.0,
        "resumes": "j0",
        "resume_session": "s-1",
        "resume_root": "j-first",
        "resume_usage": ev.Usage(input_tokens=100, output_tokens=7),
    }
    again = resubmission(submitted(**limits), None)
    assert {name: getattr(again, name) for name in limits} == limits
    assert set(msgspec.to_builtins(resubmission(submitted(), None))).isdisjoint(FIELDS)


def test_the_limit_flags_refuse_bad_values_naming_them() -> None:
    parser = argparse.ArgumentParser(prog="mam submit", exit_on_error=False)
    add_option_flags(parser)
    for flag, said in (
        ("--model=-rf", "'-rf' is not a model name"),
        ("--budget-tokens=10k", "'10k' is not a whole number"),
        ("--budget-usd=0", "'0' must be more than 0 dollars"),
        ("--max-turns=0", "'0' is out of range (1 to 10000)"),
        ("--tree-budget-usd=x", "'x' is not an amount in dollars"),
    ):
        with pytest.raises(argparse.ArgumentError, match=re.escape(said)):
            parser.parse_args([flag])
    args = parser.parse_args(["--budget-tokens", "10_000", "--budget-usd", "$2.50", "--model", "gpt-5-codex"])
    given = {name: value for name, value in option_values(args).items() if value is not None}
    assert given == {"budget_tokens": 10_000, "budget_usd": 2.5, "model": "gpt-5-codex"}
