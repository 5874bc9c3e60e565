// The dashboard: one event stream from the server (a snapshot, then changes), no polling.

import { drawAgents, drawDetail, drawHeader, drawJobs, drawRefusals, worktreeJob } from "./view.js";

const state = {
  workspace: "", broker: "", connected: false, projector: null,
  jobs: new Map(), agents: new Map(), refusals: [], detail: null, jobId: null, verdict: "", diff: null,
};
let stream = null;
let pending = false;

function draw() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    drawHeader(state);
    drawJobs(state, open);
    drawAgents(state);
    drawRefusals(state);
    drawDetail(state);
  });
}

function params() {
  const form = new FormData(document.querySelector("#filters"));
  const query = new URLSearchParams();
  for (const key of ["status", "agent", "label"]) if (form.get(key)) query.set(key, form.get(key).trim());
  if (state.jobId) query.set("job", state.jobId);
  return query;
}

function addEvent(entry) {
  const detail = state.detail;
  const id = entry.event && entry.event.id;
  if (id && detail.seen.has(id)) return;
  if (id) detail.seen.add(id);
  detail.events.push(entry);
  if (entry.event.type === "output") detail.output += entry.event.text;
}

// The stream carries a record with its prompt cut (prompt_cut): the whole one comes from /api/jobs/ID.
function withWholePrompt(record) {
  const whole = state.detail && state.detail.whole;
  if (!record || !record.prompt_cut) return record;
  if (!whole || whole.job_id !== record.job_id) return record;
  const { prompt_cut, ...rest } = record;
  return { ...rest, prompt: whole.prompt };
}

async function fetchWhole(jobId) {
  try {
    const response = await fetch(`/api/jobs/${encodeURIComponent(jobId)}`);
    if (!response.ok) return;
    const { record } = await response.json();
    const detail = state.detail;
    if (!detail || detail.job_id !== jobId || !record) return;
    detail.whole = record;
    detail.record = withWholePrompt(detail.record);
    draw();
  } catch (error) {
    // The detail keeps the cut prompt; the next open asks again.
  }
}

// The detail opens with the tail of the job's log; each click fetches the page before it.
async function earlier() {
  const detail = state.detail;
  if (!detail || !(detail.logStart > 0)) return;
  const jobId = detail.job_id;
  const response = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/log?before=${detail.logStart}`);
  if (!response.ok || state.detail !== detail) return;
  const page = await response.json();
  const older = page.events.filter((entry) => {
    const id = entry.event && entry.event.id;
    if (id && detail.seen.has(id)) return false;
    if (id) detail.seen.add(id);
    return true;
  });
  detail.events = [...older, ...detail.events];
  detail.output = detail.events.filter((e) => e.event && e.event.type === "output").map((e) => e.event.text).join("");
  detail.logStart = page.start;
  draw();
}

// A finished worktree job's diff: asked for once per job shown (and again after a merge or discard).
async function fetchDiff(jobId) {
  state.diff = { job_id: jobId, loading: true };
  try {
    const response = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/diff`);
    const answer = await response.json();
    if (state.jobId !== jobId) return;
    state.diff = response.ok ? answer : { job_id: jobId, error: answer.error };
  } catch (error) {
    state.diff = { job_id: jobId, error: `cannot load the diff: ${error}` };
  }
  draw();
}

function diffWanted() {
  const record = state.detail && state.detail.record;
  if (worktreeJob(record) && !(state.diff && state.diff.job_id === record.job_id)) fetchDiff(record.job_id);
}

// Merge (or squash-merge) into the workspace checkout's current branch, or discard: asked first.
async function land(action, squash) {
  const jobId = state.jobId;
  const what = action === "discard"
    ? `Discard job ${jobId}: delete its branch and worktree? Its work is lost.`
    : `${squash ? "Squash-merge" : "Merge"} job ${jobId} into the workspace checkout's current branch?`;
  if (!confirm(what)) return;
  state.verdict = `${action === "discard" ? "discarding" : "merging"} ${jobId}…`;
  draw();
  try {
    const response = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/${action}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ squash: Boolean(squash) }),
    });
    const answer = await response.json();
    state.verdict = response.ok ? answer.done : `${action} refused: ${answer.error}`;
  } catch (error) {
    state.verdict = `${action} failed: ${error}`;
  }
  if (state.jobId === jobId) fetchDiff(jobId);
  draw();
}

const handlers = {
  snapshot(data) {
    Object.assign(state, { workspace: data.workspace, broker: data.broker, connected: data.connected });
    state.projector = data.projector;
    state.jobs = new Map(data.jobs.map((job) => [job.job_id, job]));
    state.agents = new Map(data.agents.map((a) => [a.agent_id, a]));
    state.refusals = data.refusals;
    state.detail = null;
    if (data.detail) {
      state.jobId = data.detail.job_id;
      state.detail = { ...data.detail, events: [], seen: new Set(), output: "", logStart: data.detail.log_start };
      data.detail.events.forEach(addEvent);
      if (data.detail.record && data.detail.record.prompt_cut) fetchWhole(data.detail.job_id);
    }
  },
  job({ record, shown, detail }) {
    if (shown) state.jobs.set(record.job_id, record);
    else state.jobs.delete(record.job_id);
    if (detail && state.detail && state.detail.job_id === detail.job_id) state.detail.record = withWholePrompt(detail);
  },
  event({ job_id, event }) {
    if (state.detail && state.detail.job_id === job_id) addEvent({ event });
  },
  agent(status) {
    if (status.gone) state.agents.delete(status.agent_id);
    else state.agents.set(status.agent_id, status);
  },
  projector(status) {
    state.projector = status;
  },
  refusal(refusal) {
    state.refusals = [refusal, ...state.refusals].slice(0, 200);
  },
  broker({ connected }) {
    state.connected = connected;
  },
};

function connect() {
  if (stream) stream.close();
  const query = params();
  history.replaceState(null, "", query.size ? `?${query}` : location.pathname);
  stream = new EventSource(`/api/stream?${query}`);
  for (const [name, handle] of Object.entries(handlers)) {
    stream.addEventListener(name, (message) => {
      handle(JSON.parse(message.data));
      diffWanted();
      draw();
    });
  }
  stream.addEventListener("error", () => {
    state.connected = false;
    draw();
  });
}

function open(jobId) {
  state.jobId = jobId;
  state.verdict = "";
  connect();
}

async function cancel() {
  const jobId = state.jobId;
  state.verdict = `asking to cancel ${jobId}…`;
  draw();
  try {
    const response = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/cancel`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ reason: "cancelled from the dashboard" }),
    });
    const answer = await response.json();
    state.verdict = response.ok
      ? `cancel recorded: ${answer.job_id} is ${answer.status}`
      : `cancel refused: ${answer.error}`;
  } catch (error) {
    state.verdict = `cancel failed: ${error}`;
  }
  draw();
}

async function answer(text) {
  const jobId = state.jobId;
  const record = state.detail && state.detail.record;
  state.verdict = `answering ${jobId}…`;
  draw();
  try {
    const response = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/answer`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ answer: text, question_id: record ? record.question_id : null }),
    });
    const reply = await response.json();
    state.verdict = response.ok
      ? `answer recorded: ${reply.job_id} is ${reply.status}`
      : `answer refused: ${reply.error}`;
  } catch (error) {
    state.verdict = `answer failed: ${error}`;
  }
  draw();
}

function start() {
  const query = new URLSearchParams(location.search);
  const form = document.querySelector("#filters");
  for (const key of ["status", "agent", "label"]) if (query.get(key)) form.elements[key].value = query.get(key);
  state.jobId = query.get("job");
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    connect();
  });
  form.elements.status.addEventListener("change", connect);
  document.querySelector("#cancel").addEventListener("click", cancel);
  document.querySelector("#merge").addEventListener("click", () => land("merge", false));
  document.querySelector("#squash").addEventListener("click", () => land("merge", true));
  document.querySelector("#discard").addEventListener("click", () => land("discard", false));
  const asked = document.querySelector("#answer");
  asked.addEventListener("submit", (event) => {
    event.preventDefault();
    answer(asked.elements.text.value);
  });
  document.querySelector("#choices").addEventListener("click", (event) => {
    const choice = event.target.closest("button[data-choice]");
    if (choice) answer(choice.dataset.choice);
  });
  document.querySelector("#close").addEventListener("click", () => open(null));
  document.querySelector("#earlier").addEventListener("click", earlier);
  connect();
}

start();
