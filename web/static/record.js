// A job's record for a person: a summary (status, agent, runner, times, outcome, result, git) and its other
// human fields, with the projector's bookkeeping kept to the raw record (a <details> one click away).

import { AnsiRenderer } from "./ansi.js";
import { absolute, ago, duration, el, exitWords, statusText, visible } from "./dom.js";
import { fieldList, isTime, words } from "./fields.js";
import { idLabel, runnerLabel, shortId } from "./ids.js";

const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timed_out", "lost"]);

/** Keys only the raw record shows: how the projector keeps its books, or shown in another form. */
export const BOOKKEEPING = new Set([
  "job_id", "workspace", "runner_key", "output_seqs", "outputs_expected", "outputs_missing", "last_event_id",
  "runner_epoch", "version", "git_at_submit", "git_at_finish", "prompt_cut", "updated_at", "last_seen_at",
  "attempts", "start_inferred", "question_id", "requeue", "resume_usage", "output_bytes",
]);

// Shown by the summary itself (in its own words), so not again among the other fields.
const SUMMARISED = new Set([
  "status", "agent", "runner", "submitted_at", "claimed_at", "started_at", "finished_at", "exit_code", "error",
  "result", "cancel_reason", "cancel_requested_at", "attempt", "retries", "usage", "denials", "prompt", "labels",
  "parent", "retry_of", "after", "role", "model",
]);

/** How long a job ran (or has run so far): the server's duration_s, else from its times. */
export function ran(job) {
  if (typeof job.duration_s === "number") return job.duration_s;
  const started = Date.parse(job.started_at || "");
  if (Number.isNaN(started)) return undefined;
  const finished = job.finished_at ? Date.parse(job.finished_at) : TERMINAL.has(job.status) ? NaN : Date.now();
  return Number.isNaN(finished) ? undefined : (finished - started) / 1000;
}

function time(iso) {
  return el("span", { class: "moment", title: iso }, `${absolute(iso)} (${ago(iso)})`);
}

function text(value) {
  if (value && typeof value === "object" && !Array.isArray(value)) return el("div", {}, fieldList(value, { width: 200 }));
  return el("div", {}, typeof value === "object" ? words(value) : String(value));
}

/** `result` as the output shows it: ANSI colours as spans, other escapes dropped, never raw; other control
 * characters and bidi overrides `visible`. */
function rendered(value) {
  const box = el("pre", { class: "result" });
  new AnsiRenderer(box, visible).append(String(value));
  return box;
}

/** `abc1234 on main` (dirty, the worktree's base and diffstat when the runner reported them). */
export function gitText(git) {
  if (!git || typeof git !== "object") return "";
  const parts = [git.commit ? git.commit.slice(0, 12) : "no commit"];
  if (git.branch) parts.push(`on ${git.branch}`);
  if (git.dirty) parts.push("(uncommitted changes)");
  if (git.base && git.base !== git.commit) parts.push(`from ${git.base.slice(0, 12)}`);
  if (typeof git.files_changed === "number") {
    parts.push(`: ${git.files_changed} file${git.files_changed === 1 ? "" : "s"} changed, ` +
               `+${git.insertions || 0} -${git.deletions || 0}`);
  }
  if (git.remote) parts.push(`pushed to ${git.remote}`);
  return parts.join(" ").replace(" :", ":");
}

/** How it ended, each thing said once: `exit code 1` (not again when the error is only that), a signal by its
 * name (`timed out after 2s; stopped by SIGTERM`), the error, a cancel's reason. */
export function outcome(record) {
  const words = [];
  const code = ["succeeded", "failed", "timed_out"].includes(record.status) ? exitWords(record.exit_code) : "";
  const error = typeof record.error === "string" ? record.error.trim() : "";
  if (code && record.status !== "timed_out") words.push(code);
  if (error && error !== code) words.push(error);
  if (code && record.status === "timed_out") words.push(code);
  if (record.cancel_reason) words.push(`cancelled: ${record.cancel_reason}`);
  else if (record.cancel_requested_at && !TERMINAL.has(record.status)) words.push("cancel requested");
  return words.join("; ");
}

function attemptText(record) {
  const attempt = typeof record.attempt === "number" ? record.attempt : 1;
  const retries = typeof record.retries === "number" ? record.retries : 0;
  return retries || attempt > 1 ? `${attempt} of ${retries + 1}` : "";
}

function usageText(usage) {
  if (!usage || typeof usage !== "object") return "";
  const parts = [];
  if (typeof usage.cost_usd === "number") parts.push(usage.cost_usd < 1 ? `$${usage.cost_usd.toFixed(4)}` : `$${usage.cost_usd.toFixed(2)}`);
  for (const [key, name] of [["input_tokens", "in"], ["cached_input_tokens", "cached"], ["output_tokens", "out"], ["turns", "turns"]]) {
    if (typeof usage[key] === "number") parts.push(`${usage[key]} ${name}`);
  }
  return parts.join(", ");
}

const jobLink = (id) => el("a", { href: `?job=${encodeURIComponent(id)}`, "data-open": id, title: id }, shortId(id));

/** The summary's rows: [key, label, node] for the fields the record has. */
export function summaryRows(record) {
  const rows = [];
  const add = (key, label, node) => {
    if (node !== "" && node !== null && node !== undefined) rows.push([key, label, node]);
  };
  add("status", "status", el("span", { class: `status ${record.status}` }, statusText(record)));
  add("agent", "agent", [record.agent, record.role && `(role ${record.role})`, record.model && `model ${record.model}`]
    .filter(Boolean).join(" "));
  if (record.runner) add("runner", "runner", idLabel(record.runner, runnerLabel(record.runner, "", 64), { what: "runner id" }));
  for (const [key, label] of [["submitted_at", "submitted"], ["started_at", "started"], ["finished_at", "finished"]]) {
    if (record[key]) add(key, label, time(record[key]));
  }
  const took = ran(record);
  if (took !== undefined) add("duration", TERMINAL.has(record.status) ? "duration" : "running for", duration(took));
  add("outcome", "outcome", outcome(record));
  add("attempt", "attempt", attemptText(record));
  if (record.result) add("result", "result", rendered(record.result));
  const git = [["git_at_submit", "at submit"], ["git_at_finish", "at finish"]]
    .filter(([key]) => record[key]).map(([key, when]) => `${gitText(record[key])} (${when})`);
  if (git.length) add("git", "git", el("div", {}, git.join("\n")));
  if (record.usage) add("usage", "usage", usageText(record.usage));
  if (Array.isArray(record.denials) && record.denials.length) add("denials", "denied", el("div", {}, record.denials.join("\n")));
  const labels = Object.entries(record.labels || {}).map(([k, v]) => `${k}=${v}`).join(" ");
  add("labels", "labels", labels);
  if (record.parent) add("parent", "parent", jobLink(record.parent));
  if (record.retry_of) add("retry_of", "retry of", jobLink(record.retry_of));
  if (Array.isArray(record.after) && record.after.length) add("after", "after", el("span", {}, ...record.after.flatMap((id, i) => [i ? " " : "", jobLink(id)])));
  add("prompt", "prompt", record.prompt ? text(record.prompt) : "");
  return rows;
}

/** The record's other fields a person reads (a question, a session, limits...): key, value node. */
export function otherRows(record) {
  return Object.entries(record)
    .filter(([key, value]) => !BOOKKEEPING.has(key) && !SUMMARISED.has(key))
    .filter(([, value]) => value !== null && value !== "" && !(typeof value === "object" && Object.keys(value).length === 0))
    .map(([key, value]) => [key, key.replace(/_at$/, "").replaceAll("_", " "), isTime(value) ? time(value) : text(value)]);
}

const shownRaw = new WeakMap();

/** Draws the summary into `tbody` and the whole record into `raw` (a <pre> inside a <details>). */
export function drawRecord(tbody, raw, record) {
  const rows = record ? [...summaryRows(record), ...otherRows(record)] : [];
  tbody.replaceChildren(...rows.map(([key, label, node]) =>
    el("tr", { "data-key": key }, el("th", {}, label), el("td", {}, node))));
  if (shownRaw.get(raw) === record) return;  // a frame per output line: the same record is not printed again
  shownRaw.set(raw, record);
  raw.textContent = record ? visible(JSON.stringify(record, null, 2)) : "";
}
