// Drawing the dashboard from its state (see app.js); every value is shown as text.

import { ago, el, fill, row, short } from "./dom.js";

const $ = (selector) => document.querySelector(selector);
const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timed_out", "lost"]);

function status(value) {
  return el("td", { class: `status ${value}`, "data-status": value }, value);
}

// What the agent reported it spent: `$0.0123` (two places from a dollar up), nothing when it reported no cost.
function cost(usage) {
  const usd = usage ? usage.cost_usd : undefined;
  if (typeof usd !== "number") return el("td", { class: "cost" }, "");
  const tokens = ["input_tokens", "cached_input_tokens", "output_tokens", "turns"]
    .filter((k) => typeof usage[k] === "number").map((k) => `${k} ${usage[k]}`).join(", ");
  return el("td", { class: "cost", title: tokens }, usd < 1 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`);
}

// A waiting job's question, shown where its prompt would be.
function asks(job) {
  return job.status === "waiting" && job.question ? `asks: ${job.question}` : "";
}

// The answer form of a waiting job: its question, a button per choice (else a text field). Redrawn only when
// the question changes, so what a person is typing stays.
function drawAnswer(record) {
  const form = $("#answer");
  form.hidden = !record || record.status !== "waiting";
  if (form.hidden || form.dataset.questionId === record.question_id) return;
  form.dataset.questionId = record.question_id || "";
  $("#question").textContent = record.question || "";
  const choices = record.choices || [];
  $("#choices").replaceChildren(...choices.map((c) => el("button", { type: "button", "data-choice": c }, c)));
  form.elements.text.hidden = choices.length > 0;
  $("#send-answer").hidden = choices.length > 0;
  form.elements.text.value = "";
}

export function drawHeader(state) {
  $("#workspace").textContent = state.workspace || "";
  const broker = $("#broker");
  broker.textContent = state.connected ? `broker ${state.broker}` : `broker ${state.broker || ""}: reconnecting…`;
  broker.className = `badge ${state.connected ? "online" : "offline"}`;
  const projector = state.projector;
  const badge = $("#projector");
  badge.textContent = projector
    ? `projector ${projector.status} (pid ${projector.pid} on ${projector.host}, v${projector.version})` +
      (projector.detail ? `: ${projector.detail}` : "")
    : "projector: none announced";
  badge.className = `badge ${projector ? projector.status : "offline"}`;
}

export function drawJobs(state, open) {
  const jobs = [...state.jobs.values()].sort((a, b) =>
    a.submitted_at === b.submitted_at ? (a.job_id < b.job_id ? 1 : -1) : a.submitted_at < b.submitted_at ? 1 : -1,
  );
  fill(
    $("#jobs tbody"),
    jobs.map((job) => {
      const labels = Object.entries(job.labels || {}).map(([k, v]) => `${k}=${v}`).join(" ");
      const tr = row(
        [el("td", { class: "id" }, job.job_id), status(job.status), job.agent, labels,
         el("td", { title: job.submitted_at }, ago(job.submitted_at)), cost(job.usage), short(asks(job) || job.prompt)],
        { "data-job-id": job.job_id, class: job.job_id === state.jobId ? "selected" : "" },
      );
      tr.addEventListener("click", () => open(job.job_id));
      return tr;
    }),
  );
  $("#no-jobs").hidden = jobs.length > 0;
}

// A stopping runner (SIGTERM: it claims nothing more, its jobs finish) says so in `state` (mam/presence.py).
const shownStatus = (a) => (a.status === "online" && a.state ? a.state : a.status);

export function drawAgents(state) {
  const order = (a) => `${a.status === "online" ? 0 : 1} ${a.agent} ${a.agent_id}`;
  const agents = [...state.agents.values()].sort((a, b) => (order(a) < order(b) ? -1 : 1));
  fill(
    $("#agents tbody"),
    agents.map((a) =>
      row([a.agent_id, a.agent, status(shownStatus(a)), a.host, el("td", { title: a.since }, ago(a.since)),
           `${(a.jobs || []).length}/${a.concurrency}`], { "data-agent-id": a.agent_id }),
    ),
  );
}

export function drawRefusals(state) {
  $("#refusals").replaceChildren(
    ...state.refusals.map((r) =>
      el("li", {},
        el("span", { class: "reason" }, r.reason),
        el("span", { class: "quiet" }, ` ${r.job_id ? `job ${r.job_id}, ` : ""}${r.topic} ${ago(r.received_at)}`),
        el("code", {}, short(r.payload, 120))),
    ),
  );
}

// Output accounting (mam/output_accounting.py, the same words as `mam show`): one line per attempt
// whose log lacks some of the output events its runner said it published.
function incomplete(expected, missing, label = "") {
  if (typeof expected !== "number" || !Array.isArray(missing) || missing.length === 0) return null;
  const count = missing.reduce((n, [first, last]) => n + last - first + 1, 0);
  const named = missing.slice(0, 8).map(([first, last]) => (first === last ? `${first}` : `${first}-${last}`));
  const more = missing.length - 8;
  const seqs = named.join(", ") + (more > 0 ? ` and ${more} more range${more === 1 ? "" : "s"}` : "");
  return `${label}output incomplete: ${count} of ${expected} output events missing (seq ${seqs})`;
}

function incompleteLines(record) {
  if (!record) return [];
  const current = typeof record.attempt === "number" ? record.attempt : 1;
  const earlier = (record.attempts || [])
    .filter((a) => a.attempt !== current)
    .map((a) => incomplete(a.outputs_expected, a.outputs_missing, `attempt ${a.attempt}: `));
  return [...earlier, incomplete(record.outputs_expected, record.outputs_missing)].filter(Boolean);
}

// A finished worktree job (its record names the commit it started from): its diff, fetched on demand
// from /api/jobs/ID/diff, and the merge and discard buttons while its branch holds work.
export function worktreeJob(record) {
  const git = record && record.git_at_finish;
  return Boolean(git && git.base && git.commit && TERMINAL.has(record.status));
}

function drawChanges(state, record) {
  const shown = worktreeJob(record);
  const diff = shown && state.diff && state.diff.job_id === record.job_id ? state.diff : null;
  $("#changes").hidden = !shown;
  $("#landing").hidden = !(diff && diff.branch && !diff.error);
  if (!shown) return;
  $("#diff-stat").textContent = diff && diff.stat ? diff.stat : "";
  const note = !diff ? "loading the diff…" : diff.error || diff.note ||
    (diff.cut ? `the diff is longer than shown: \`mam diff ${record.job_id}\` prints all of it` : "");
  $("#diff-note").textContent = note;
  $("#diff").textContent = diff && !diff.error ? diff.diff : "";
}

export function drawDetail(state) {
  const detail = state.detail;
  $("#detail").hidden = !detail;
  if (!detail) return;
  const record = detail.record;
  $("#detail-id").textContent = detail.job_id;
  const badge = $("#detail-status");
  badge.textContent = record ? record.status : "unknown";
  badge.className = `status ${record ? record.status : ""}`;
  $("#cancel").hidden = !record || TERMINAL.has(record.status);
  drawChanges(state, record);
  drawAnswer(record);
  $("#detail-problem").textContent = detail.problem || "";
  const lines = incompleteLines(record);
  $("#detail-incomplete").hidden = lines.length === 0;
  $("#detail-incomplete").textContent = lines.join("\n");
  $("#verdict").textContent = state.verdict || "";
  fill(
    $("#record tbody"),
    Object.entries(record || {})
      .filter(([, v]) => v !== null && v !== "" && !(typeof v === "object" && Object.keys(v).length === 0))
      .map(([k, v]) => row([el("th", {}, k), el("td", {}, el("div", {}, typeof v === "object" ? JSON.stringify(v) : String(v)))])),
  );
  fill(
    $("#events tbody"),
    detail.events.map((entry) => {
      const { type, id, v, ts, job_id, ...rest } = entry.event || {};
      const given = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== null));
      return row([entry.seq ?? "live", ago(entry.received_at || ts), type, short(JSON.stringify(given), 120)]);
    }),
  );
  $("#output").textContent = detail.output;
  $("#earlier").hidden = !(detail.logStart > 0);
}
