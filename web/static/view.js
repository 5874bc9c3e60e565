// Drawing the dashboard from its state (see app.js); every value is shown as text.

import { count, denied, duration, el, fill, row, short, statusText, visible, when } from "./dom.js";
import { copyButton, idLabel, runnerLabel, shortId } from "./ids.js";
import { rangeText } from "./listing.js";
import { drawRecord, ran } from "./record.js";

const $ = (selector) => document.querySelector(selector);
const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timed_out", "lost"]);

function status(value, job = null) {
  const denials = job ? denied(job) : [];
  const attrs = { class: `status ${value}${denials.length ? " denied" : ""}`, "data-status": value };
  if (denials.length) Object.assign(attrs, { "data-denials": String(denials.length), title: denials.join("\n") });
  return el("td", attrs, job ? statusText(job) : value);
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

const RUNNER_CELL = { tag: "td", what: "runner id", extra: "wide" };
const PARENT_CELL = { tag: "td", what: "parent's id", extra: "wider" };
const cell = (value, attrs = {}) => el("td", { title: value == null ? "" : String(value), ...attrs }, value ?? "");

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
      const prompt = asks(job) || job.prompt;
      const tr = row(
        [idLabel(job.job_id, shortId(job.job_id), { tag: "td" }), status(job.status, job), cell(job.agent),
         job.runner ? idLabel(job.runner, runnerLabel(job.runner, job.agent, 12), RUNNER_CELL) : cell("", { class: "wide" }),
         cell(labels, { class: "wider" }), when(job.submitted_at),
         cell(duration(ran(job))), cell(job.exit_code, { class: "wide num" }), cell(job.attempt, { class: "wide num" }),
         job.parent ? idLabel(job.parent, shortId(job.parent), PARENT_CELL) : cell("", { class: "wider" }),
         cost(costOf(job)), el("td", { class: "prompt", title: short(prompt, 400) }, short(prompt))],
        { "data-job-id": job.job_id, class: job.job_id === state.jobId ? "selected" : "" },
      );
      tr.tabIndex = 0;  // reachable by keyboard: Enter opens it (a pointer: `openOnPress`)
      tr.addEventListener("keydown", (event) => {
        if (event.key === "Enter") open(job.job_id);
      });
      return tr;
    }),
  );
  $("#no-jobs").hidden = rows.length > 0;
  const page = state.page;
  $("#range").textContent = rangeText(page, count);
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
  $("#runner-count").textContent = state.agents.size ? `${online} of ${state.agents.size} online` : "none";
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

export function drawRefusals(state) {
  $("#refusal-count").textContent = state.refusals.length ? String(state.refusals.length) : "none";
  // Messages the projector failed to handle (a projector fault, not a refusal): its status counts the ones in
  // <logs>/_set_aside.jsonl, across its restarts, and says why (docs/dashboard.md).
  const aside = state.projector && state.projector.set_aside;
  const setAside = $("#set-aside");
  setAside.hidden = !aside;
  if (aside) {
    const reasons = state.projector.set_aside_reasons || [];
    setAside.replaceChildren(
      el("strong", {}, `${aside} message${aside === 1 ? "" : "s"} set aside`),
      ` (a projector fault, not a refusal): ${visible(reasons.join("; "))}. `,
      el("code", {}, "mam set-aside"), " lists them, ", el("code", {}, "mam set-aside --replay --all"),
      " tries them again.");
  }
  $("#refusals").replaceChildren(
    ...state.refusals.map((r) =>
      el("li", {},
        el("span", { class: "reason" }, r.reason),
        el("span", { class: "quiet" }, ` ${r.job_id ? `job ${r.job_id}, ` : ""}${r.topic} `),
        when(r.received_at, "span"),
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
  drawRecord($("#record tbody"), $("#raw-record pre"), record);
  fill(
    $("#events tbody"),
    detail.events.map((entry) => {
      const { type, id, v, ts, job_id, ...rest } = entry.event || {};
      const given = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== null));
      return row([entry.seq ?? "live", when(entry.received_at || ts), el("td", { class: "type" }, type),
                  short(JSON.stringify(given), 120)]);
    }),
  );
  $("#earlier").hidden = !(detail.logStart > 0);
}
