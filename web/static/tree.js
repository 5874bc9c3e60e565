// The delegation tree of the open job: its root and every job delegated under it, indented, each with its
// status; a node with children folds and unfolds (the folded ones are remembered while the page is open).

import { denied, el, short, statusText } from "./dom.js";
import { shortId } from "./ids.js";

/** The root of `jobId`'s tree: a row's `root` when the server gave one, else up the known parents. */
export function rootOf(jobId, known) {
  let current = jobId;
  const seen = new Set();
  while (current && !seen.has(current)) {
    seen.add(current);
    const job = known(current);
    if (!job) return current;
    if (job.root) return job.root;
    if (!job.parent) return current;
    current = job.parent;
  }
  return current;
}

/** The tree's jobs: GET /api/jobs?root=ROOT, or those the page holds whose parents lead to the root. */
export async function fetchTree(root, jobs) {
  try {
    const response = await fetch(`/api/jobs?${new URLSearchParams({ root, limit: "500" })}`);
    if (response.ok) {
      const answer = await response.json();
      return { root, jobs: answer.jobs, total: answer.total };
    }
    if (response.status !== 404) return { root, jobs: [], error: `tree: HTTP ${response.status}` };
  } catch (error) {
    return { root, jobs: [], error: `tree: ${error}` };
  }
  const byId = new Map(jobs.map((job) => [job.job_id, job]));
  const under = jobs.filter((job) => rootOf(job.job_id, (id) => byId.get(id)) === root);
  return { root, jobs: under, total: under.length };
}

export function drawTree(target, tree, { selected, folded, open, live }) {
  if (!tree) {
    target.replaceChildren();
    return;
  }
  const byId = new Map(tree.jobs.map((job) => [job.job_id, { ...job, ...(live(job.job_id) || {}) }]));
  if (!byId.has(tree.root)) byId.set(tree.root, { job_id: tree.root, ...(live(tree.root) || {}) });
  const children = new Map();
  for (const job of byId.values()) {
    if (job.job_id === tree.root || !job.parent) continue;
    const parent = byId.has(job.parent) ? job.parent : tree.root;
    if (!children.has(parent)) children.set(parent, []);
    children.get(parent).push(job);
  }
  for (const list of children.values()) list.sort((a, b) => ((a.submitted_at || "") < (b.submitted_at || "") ? -1 : 1));
  const node = (job, depth) => {
    const kids = children.get(job.job_id) || [];
    const closed = folded.has(job.job_id);
    const toggle = kids.length
      ? el("button", { type: "button", class: "fold", "data-fold": job.job_id, title: closed ? "unfold" : "fold" },
        closed ? "▸" : "▾")
      : el("span", { class: "fold" }, "");
    const line = el("div", { class: job.job_id === selected ? "node selected" : "node" },
      toggle,
      el("a", { href: `?job=${encodeURIComponent(job.job_id)}`, class: "id", "data-open": job.job_id, title: job.job_id },
        shortId(job.job_id)),
      el("span", { class: `status ${job.status || ""}${denied(job).length ? " denied" : ""}`,
                   "data-status": job.status || "" }, job.status ? statusText(job) : "?"),
      el("span", { class: "quiet" }, job.agent || ""),
      el("span", { class: "prompt" }, short(job.prompt || "", 60)),
      kids.length ? el("span", { class: "quiet" }, `${kids.length} delegated`) : "");
    const item = el("li", { "data-job-id": job.job_id, "data-depth": String(depth) }, line);
    if (kids.length && !closed) item.append(el("ul", {}, ...kids.map((kid) => node(kid, depth + 1))));
    return item;
  };
  const list = el("ul", { class: "tree" }, node(byId.get(tree.root), 0));
  target.replaceChildren(list);
  list.addEventListener("click", (event) => {
    const fold = event.target.closest("button[data-fold]");
    if (fold) {
      const id = fold.dataset.fold;
      if (folded.has(id)) folded.delete(id);
      else folded.add(id);
      drawTree(target, tree, { selected, folded, open, live });
      return;
    }
    const link = event.target.closest("a[data-open]");
    if (link) {
      event.preventDefault();
      open(link.dataset.open);
    }
  });
}
