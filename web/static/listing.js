// Which jobs the table shows: one page of GET /api/jobs (the server's filters, search, time range and
// total), or, from a server without that route, the same page worked out from the jobs the stream holds.
//
// The stream (status, agent, label) keeps the rows live; the page's query adds the search (q, over prompt
// and labels), the time range (since, until: submitted in it) and the paging (limit, offset).

export const PAGE_SIZE = 50;
export const DEFAULT_SORT = "-submitted";
/** What a column header sorts by (GET /api/jobs `sort`, `-` first for descending). */
export const SORT_KEYS = ["submitted", "status", "agent", "duration"];
export const STREAM_KEYS = ["status", "agent", "label"];
export const PAGE_KEYS = ["q", "since", "until"];

/** The filter form's values, trimmed; since/until (datetime-local, the user's time) as UTC ISO times. */
export function chosen(form) {
  const data = new FormData(form);
  const out = {};
  for (const key of [...STREAM_KEYS, ...PAGE_KEYS]) {
    const value = String(data.get(key) || "").trim();
    if (!value) continue;
    if (key === "since" || key === "until") {
      const time = new Date(value);
      if (Number.isNaN(time.getTime())) throw new Error(`${key} ${JSON.stringify(value)} is not a date and time`);
      out[key] = time.toISOString();
    } else {
      out[key] = value;
    }
  }
  return out;
}

/** A UTC ISO time as a datetime-local input shows it (the user's local time). */
export function localInput(iso) {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60000);
  return local.toISOString().slice(0, 16);
}

export async function fetchPage(filters, offset, limit = PAGE_SIZE, sort = DEFAULT_SORT) {
  const query = new URLSearchParams({ ...filters, sort, limit: String(limit), offset: String(offset) });
  const response = await fetch(`/api/jobs?${query}`);
  if (response.status === 404 || response.status === 405) return null;  // a server without the route
  const answer = await response.json();
  if (!response.ok) return { error: answer.error || `HTTP ${response.status}`, total: 0, offset, limit, jobs: [] };
  return { ...answer, source: "server" };
}

function labelText(job) {
  return Object.entries(job.labels || {}).map(([k, v]) => `${k}=${v}`).join(" ");
}

const newestFirst = (a, b) =>
  a.submitted_at === b.submitted_at ? (a.job_id < b.job_id ? 1 : -1) : a.submitted_at < b.submitted_at ? 1 : -1;

/** The page from job rows the page already holds (the stream's, already filtered by status, agent, label). */
function sortValue(job, key) {
  if (key === "submitted") return job.submitted_at || "";
  if (key === "duration") {
    const started = Date.parse(job.started_at || "");
    if (Number.isNaN(started)) return -1;
    return (job.finished_at ? Date.parse(job.finished_at) : Date.now()) - started;
  }
  return job[key] || "";
}

function sorter(sort) {
  const key = sort.replace(/^-/, "");
  const sign = sort.startsWith("-") ? -1 : 1;
  return (a, b) => {
    const x = sortValue(a, key);
    const y = sortValue(b, key);
    if (x !== y) return x < y ? -sign : sign;
    return newestFirst(a, b);
  };
}

export function localPage(jobs, filters, offset, limit = PAGE_SIZE, sort = DEFAULT_SORT) {
  const words = (filters.q || "").toLowerCase();
  const since = filters.since ? Date.parse(filters.since) : -Infinity;
  const until = filters.until ? Date.parse(filters.until) : Infinity;
  const matching = [...jobs].filter((job) => {
    const at = Date.parse(job.submitted_at);
    if (at < since || at > until) return false;
    return !words || `${job.prompt || ""} ${labelText(job)}`.toLowerCase().includes(words);
  }).sort(sort === DEFAULT_SORT ? newestFirst : sorter(sort));
  return { total: matching.length, offset, limit, jobs: matching.slice(offset, offset + limit), source: "page" };
}

/** "1-50 of 1,234" */
export function rangeText(page, count) {
  if (!page || page.total === 0) return "no jobs match";
  const first = page.offset + 1;
  const last = page.offset + page.jobs.length;
  return `${count(first)}-${count(last)} of ${count(page.total)}`;
}
