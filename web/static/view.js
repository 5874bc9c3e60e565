// Drawing the dashboard from its state (see app.js); every value is shown as text.

import { fitColumns } from "./columns.js";
import { absolute, count, denied, duration, el, exitText, exitWords, fill, row, short, statusText, visible, when } from "./dom.js";
import { fieldList } from "./fields.js";
import { copyButton, idLabel, runnerLabel, shortId } from "./ids.js";
import { rangeText } from "./listing.js";
import { drawRecord, ran } from "./record.js";

const $ = (selector) => document.querySelector(selector);
const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timed_out", "lost"]);
/** A job waiting for something before a runner may run it: the server says what (`waits`). */
export const QUEUED = new Set(["submitted", "blocked"]);

function status(value, job = null) {
  const denials = job ? denied(job) : [];
  const attrs = { class: `status ${value}${denials.length ? " denied" : ""}`, "data-status": value };
  if (denials.length) Object.assign(attrs, { "data-denials": String(denials.length), title: denials.join("\n") });
  return el("td", attrs, job ? statusText(job) : value);
}

// What the agent reported it spent: `$0.0123` (two places from a dollar up), nothing when it reported no cost.
function cost(usage) {
  const usd = usage ? usage.cost_usd : undefined;
  if (typeof usd !== "number") return el("td", { class: "cost c-cost" }, "");
  const tokens = ["input_tokens", "cached_input_tokens", "output_tokens", "turns"]
    .filter((k) => typeof usage[k] === "number").map((k) => `${k} ${usage[k]}`).join(", ");
  return el("td", { class: "cost c-cost", title: tokens }, usd < 1 ? `$${usd.toFixed(4)}` : `$${usd.toFixed(2)}`);
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
  $("#question").textContent = visible(record.question);
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
    ? visible(`projector ${projector.status} (pid ${projector.pid} on ${projector.host}, v${projector.version})` +
      (projector.detail ? `: ${projector.detail}` : ""))
    : "projector: none announced";
  badge.className = `badge ${projector ? projector.status : "offline"}`;
}

function costOf(job) {
  if (job.usage) return job.usage;
  return typeof job.cost_usd === "number" ? { cost_usd: job.cost_usd } : undefined;
}

const RUNNER_CELL = { tag: "td", what: "runner id", extra: "c-runner" };
const PARENT_CELL = { tag: "td", what: "parent's id", extra: "c-parent" };
const cell = (value, attrs = {}) => el("td", { title: value == null ? "" : String(value), ...attrs }, value ?? "");

/** What a job is (its prompt, or the question a waiting one asks) and, for a queued one, why it waits. */
function promptCell(job) {
  const prompt = asks(job) || job.prompt || "";
  const td = el("td", { class: "prompt c-prompt", title: short(prompt, 400) }, el("div", { class: "text" }, short(prompt, 200)));
  const waits = QUEUED.has(job.status) ? job.waits : null;
  if (waits) td.append(el("div", { class: "waits", title: waits }, waits));
  return td;
}

/** A press on a row of `tbody` opens its job. Not a row's "click": the table is drawn anew on every
change, and a row replaced between the button going down and up (a running job's row, as its
output streams in) gets no click, so the press was lost. The job a press went down on is kept, and
opened if the button comes up on a row of the same job; a press on a button (copy) opens nothing. */
export function openOnPress(tbody, open) {
  let pressed = null;
  const jobOf = (event) => (event.target.closest("button, a") ? null : event.target.closest("tr[data-job-id]"));
  tbody.addEventListener("pointerdown", (event) => {
    pressed = event.button === 0 ? jobOf(event)?.dataset.jobId ?? null : null;
  });
  tbody.addEventListener("pointerup", (event) => {
    const id = jobOf(event)?.dataset.jobId;
    if (id && id === pressed && event.button === 0) open(id);
    pressed = null;
  });
}

/** The table: `rows` is the page (listing.js), each row with the stream's newest fields over it. */
export function drawJobs(state, rows, open) {
  fill(
    $("#jobs tbody"),
    rows.map((job) => {
      const labels = Object.entries(job.labels || {}).map(([k, v]) => `${k}=${v}`).join(" ");
      const tr = row(
        [idLabel(job.job_id, shortId(job.job_id), { tag: "td" }), status(job.status, job), cell(job.agent),
         job.runner ? idLabel(job.runner, runnerLabel(job.runner, job.agent, 12), RUNNER_CELL) : cell("", { class: "c-runner" }),
         cell(labels, { class: "c-labels" }), when(job.submitted_at),
         cell(duration(ran(job)), { class: "c-duration" }),
         el("td", { class: "c-exit num", title: exitWords(job.exit_code) }, exitText(job.exit_code)),
         cell(job.attempt, { class: "c-attempt num" }),
         job.parent ? idLabel(job.parent, shortId(job.parent), PARENT_CELL) : cell("", { class: "c-parent" }),
         cost(costOf(job)), promptCell(job)],
        { "data-job-id": job.job_id, class: job.job_id === state.jobId ? "selected" : "" },
      );
      tr.tabIndex = 0;  // reachable by keyboard: Enter opens it (a pointer: `openOnPress`)
      tr.addEventListener("keydown", (event) => {
        if (event.key === "Enter") open(job.job_id);
      });
      return tr;
    }),
  );
  fitColumns($("#jobs"), rows);
  $("#no-jobs").hidden = rows.length > 0 || !state.page;
  $("#no-jobs-yet").hidden = Boolean(state.filtered);
  $("#no-jobs-match").hidden = !state.filtered;
  const page = state.page;
  $("#range").textContent = page && page.total === 0 && !state.filtered ? "" : rangeText(page, count);
  $("#prev").disabled = !page || page.offset <= 0;
  $("#next").disabled = !page || page.offset + page.jobs.length >= page.total;
  const problem = $("#list-problem");
  problem.hidden = !state.listProblem;
  problem.textContent = visible(state.listProblem);
}

// A stopping runner (SIGTERM: it claims nothing more, its jobs finish) says so in `state` (mam/presence.py).
const shownStatus = (a) => (a.status === "online" && a.state ? a.state : a.status);

function busy(a) {
  const jobs = a.jobs || [];
  const words = jobs.length ? `${jobs.length}/${a.concurrency} busy` : `idle (0/${a.concurrency})`;
  return el("td", { class: jobs.length ? "busy" : "idle", title: jobs.join(" ") }, words);
}

function sinceCell(iso) {
  const cell = when(iso);
  cell.classList.add("c-since");
  return cell;
}

export function drawAgents(state) {
  const names = [...new Set([...state.agents.values()].map((a) => a.agent))].sort();
  const known = $("#known-agents");
  if (known.dataset.names !== names.join(" ")) {  // the submit form offers the agents runners serve
    known.dataset.names = names.join(" ");
    known.replaceChildren(...names.map((name) => el("option", { value: name })));
  }
  const online = [...state.agents.values()].filter((a) => a.status === "online").length;
  $("#runner-count").textContent = state.agents.size ? `${online} of ${state.agents.size} online` : "";
  $("#agents").hidden = state.agents.size === 0;
  $("#no-runners").hidden = online > 0;
  if (online === 0) {
    $("#no-runners").replaceChildren(state.agents.size ? "No runner is online, so queued jobs wait. " : "No runner yet. ",
      "Start one where the agent's CLI is installed: ", el("code", {}, "mam-agent --agent shell"),
      " (or claude-code, codex, gemini, aider).");
  }
  const order = (a) => `${a.status === "online" ? 0 : 1} ${a.agent} ${a.agent_id}`;
  const agents = [...state.agents.values()].sort((a, b) => (order(a) < order(b) ? -1 : 1));
  fill(
    $("#agents tbody"),
    agents.map((a) =>
      row([idLabel(a.agent_id, runnerLabel(a.agent_id, a.agent), { tag: "td", what: "runner id" }), a.agent, status(shownStatus(a)), busy(a),
        el("td", { class: "c-host", title: a.host || "" }, a.host || ""), when(a.updated_at || a.since),
        sinceCell(a.since)],
        { "data-agent-id": a.agent_id }),
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
  $("#diff-stat").textContent = diff && diff.stat ? visible(diff.stat) : "";
  const note = !diff ? "loading the diff…" : diff.error || diff.note ||
    (diff.cut ? `the diff is longer than shown: \`mam diff ${record.job_id}\` prints all of it` : "");
  $("#diff-note").textContent = visible(note);
  $("#diff").textContent = diff && !diff.error ? visible(diff.diff) : "";
}

export function drawDetail(state) {
  const detail = state.detail;
  $("#detail").hidden = !detail;
  if (!detail) return;
  const record = detail.record;
  if ($("#detail-id").textContent !== detail.job_id) {
    $("#detail-id").textContent = detail.job_id;
    $("#detail-copy").replaceChildren(copyButton(detail.job_id, "job id"));
  }
  const badge = $("#detail-status");
  badge.textContent = record ? statusText(record) : "unknown";
  const refused = record ? denied(record) : [];
  badge.className = `status ${record ? record.status : ""}${refused.length ? " denied" : ""}`;
  $("#detail-denials").hidden = refused.length === 0;
  fill($("#detail-denials ul"), refused.map((d) => el("li", {}, d)));
  const finished = !record || TERMINAL.has(record.status);
  $("#cancel").hidden = finished;
  $("#cancel-tree").hidden = finished;
  $("#retry").hidden = !record || !TERMINAL.has(record.status);
  if (finished) $("#cancel-form").hidden = true;
  drawChanges(state, record);
  drawAnswer(record);
  $("#detail-problem").textContent = visible(detail.problem);
  const lines = incompleteLines(record);
  $("#detail-incomplete").hidden = lines.length === 0;
  $("#detail-incomplete").textContent = lines.join("\n");
  $("#verdict").textContent = visible(state.verdict);
  drawWaits(detail);
  drawRecord($("#record tbody"), $("#raw-record pre"), record);
  const events = detail.events.map((entry) => {
    const { type, id, v, ts, job_id, ...rest } = entry.event || {};
    return row([entry.seq ?? "live", when(entry.received_at || ts), el("td", { class: "type" }, type),
                el("td", { class: "details" }, fieldList(rest))]);
  });
  fill($("#events tbody"), events.length ? events : [el("tr", { class: "empty" }, el("td", { colSpan: 4, class: "quiet" },
    detail.problem ? "No events to show." : "No events recorded yet."))]);
  $("#earlier").hidden = !(detail.logStart > 0);
  drawNoOutput(detail);
}

// Why the open job waits (the server's words, `waits`), and when a retried one may be claimed again.
function drawWaits(detail) {
  const record = detail.record;
  const queued = record && QUEUED.has(record.status);
  const lines = queued && detail.waits ? [detail.waits] : [];
  const from = queued && record.not_before ? Date.parse(record.not_before) : NaN;
  if (from > Date.now()) lines.unshift(`attempt ${record.attempt}: claimable from ${absolute(record.not_before)}`);
  $("#detail-waits").hidden = lines.length === 0;
  $("#detail-waits").textContent = visible(lines.join("\n"));
}

// A job with no output shows a sentence, not an empty pane.
function drawNoOutput(detail) {
  const record = detail.record;
  const none = !detail.output;
  $("#output").hidden = none;
  const note = $("#no-output");
  note.hidden = !none;
  if (!none) return;
  const status = record ? record.status : "";
  note.textContent = detail.logStart > 0 ? "No output in the newest part of its log: earlier output loads the rest."
    : TERMINAL.has(status) ? "This job printed nothing."
      : QUEUED.has(status) || status === "claimed" ? "No output yet: the job has not started."
        : record ? "No output yet: it shows here as the job prints." : "";
}
