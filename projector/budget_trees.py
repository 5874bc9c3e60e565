"""The projector's view of budgeted trees: each parent's children, finished ones too, for the trees under a
job with a tree budget only (`mam.contract.tree_budget`).

Memory follows the budgeted trees, not the history: a tree's jobs are read
from the query index the first time its budget is checked (its committed
jobs, by `parent`), and every job submitted under a budgeted job while the
projector runs is added as it is accepted (so the jobs of a batch not
committed yet are known too). Without a usable index the registry scan at
start gives every parent's children, and nothing is read later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from mam.contract import tree_budget
from mam.contract.tree_budget import Lookup
from mam.projector.index_writer import IndexWriter


class BudgetTrees:
    def __init__(self) -> None:
        self.children: dict[str, set[str]] = {}
        self.index: IndexWriter | None = None
        self.loaded: set[str] = set()
        """The budgeted jobs whose committed descendants were read from the index."""
        self.complete = False
        """`children` holds every parent's children (from a registry scan): nothing to read."""

    def from_index(self, index: IndexWriter) -> None:
        self.children, self.index, self.loaded, self.complete = {}, index, set(), False

    def from_scan(self, children: dict[str, set[str]]) -> None:
        self.children, self.index, self.loaded, self.complete = children, None, set(), True

    def accepted(self, job_id: str, parent: str, lookup: Lookup) -> None:
        """A submit under `parent` was accepted: kept when a job above it has a tree budget."""
        if any(tree_budget.budgeted(record) for record in tree_budget.ancestors(parent, lookup)):
            self.children.setdefault(parent, set()).add(job_id)

    def of(self, root: str) -> Mapping[str, Iterable[str]]:
        """Each parent's children, complete for the tree under `root`."""
        if not self.complete and root not in self.loaded:
            found = self.index.descendants(root) if self.index is not None else None
            for parent, job_id in found or ():
                self.children.setdefault(parent, set()).add(job_id)
            if found is not None:
                self.loaded.add(root)
        return self.children


__all__ = ["BudgetTrees"]
