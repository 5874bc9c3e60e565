// The dashboard: one event stream from the server (a snapshot, then changes), no polling for jobs. The
// table's page, the open job's tree and the charts are read from the JSON routes when the stream says
// something changed (and the charts on a timer of their own); see listing.js, tree.js, stats.js.

import { lines, stackedBars } from "./charts.js";
import { detailLoader, timelineEvents } from "./detail.js";
import { onWidthChange, refreshTimes } from "./dom.js";
import {
  chosen, DEFAULT_SORT, fetchPage, localInput, localPage, PAGE_KEYS, PAGE_SIZE, SORT_KEYS, STREAM_KEYS,
} from "./listing.js";
import { OutputPane } from "./output.js";
import { DEFAULT_WINDOW, fetchStats, WINDOWS } from "./stats.js";
import { wireCopies } from "./ids.js";
import { jobActions } from "./job_actions.js";
import { soon } from "./soon.js";
import { drawTimeline } from "./timeline.js";
import { drawTree, fetchTree, rootOf } from "./tree.js";
import { drawRefusals, showingAll } from "./refusals.js";
import { drawAgents, drawDetail, drawHeader, drawJobs, openOnPress, QUEUED } from "./view.js";

const $ = (selector) => document.querySelector(selector);
const TERMINAL = new Set(["succeeded", "failed", "cancelled", "timed_out", "lost"]);
const STATS_EVERY_MS = 30_000;
const TIMES_EVERY_MS = 15_000;

const state = {
  workspace: "", broker: "", connected: false, projector: null,
  jobs: new Map(), agents: new Map(), refusals: [], detail: null, jobId: null, verdict: "", diff: null,
  page: null, serverPages: true, offset: 0, sort: DEFAULT_SORT, listProblem: "", tree: null, folded: new Set(), stats: null,
};
let stream = null;
let pending = false;
let output = null;
// What the timeline and the tree were last drawn from: a frame redraws them only when that changed (a job
// printing fast sends an output event per line, each a frame).
const drawn = { timeline: "", tree: "" };
const versions = { jobs: 0, tree: 0, clock: 0 };
const { addEvent, earlier, fetchEarly, fetchWhole, withWholePrompt } = detailLoader(state, draw);
const { answer, askCancel, cancel, diffWanted, fetchDiff, land, retry, submit } = jobActions(state, draw, open);

function filters() {
  try {
    const given = chosen($("#filters"));
    state.listProblem = "";
    return given;
  } catch (error) {
    state.listProblem = error.message;
    return {};
  }
}

function pick(given, keys) {
  return Object.fromEntries(Object.entries(given).filter(([key]) => keys.includes(key)));
}

/** The table's rows: the page, each row with the stream's newest fields over it. */
function rows() {
  state.filtered = Object.keys(filters()).length > 0;
  if (!state.serverPages) state.page = localPage(state.jobs.values(), filters(), state.offset, PAGE_SIZE, state.sort);
  if (!state.page) return [];
  return state.page.jobs.map((job) => ({ ...job, ...(state.jobs.get(job.job_id) || {}) }));
}

function draw() {
  if (pending) return;
  pending = true;
  requestAnimationFrame(() => {
    pending = false;
    drawHeader(state);
    drawJobs(state, rows(), open);
    drawAgents(state);
    drawRefusals(state, () => {
      remember();
      draw();
    });
    drawDetail(state);
    const detail = state.detail;
    $("#main").classList.toggle("with-detail", Boolean(detail));
    if (detail) {
      output.show(detail.job_id, detail.output);
      const status = detail.record ? detail.record.status : "";
      const early = detail.early || [];
      const timeline = `${detail.job_id} ${early.length} ${detail.events.length} ${status} ${versions.clock}`;
      if (timeline !== drawn.timeline) drawTimeline($("#timeline"), timelineEvents(detail), TERMINAL.has(status));
      drawn.timeline = timeline;
    }
    const tree = detail ? `${state.jobId} ${versions.tree} ${versions.jobs}` : "";
    if (tree !== drawn.tree) {
      drawTree($("#tree"), detail ? state.tree : null, {
        selected: state.jobId, folded: state.folded, open, live: (id) => state.jobs.get(id),
      });
    }
    drawn.tree = tree;
    drawCharts();
  });
}

function drawCharts() {
  const stats = state.stats;
  if (!stats || stats.drawn) return;
  stats.drawn = true;
  $("#charts-source").textContent = stats.error || (stats.source === "page" ? "(from the jobs this page holds)" : "");
  if (stats.error) return;
  const per = stats.window.per;
  for (const caption of document.querySelectorAll("#charts .per")) caption.textContent = per;
  stackedBars($("#chart-finished"), stats.finished || [], { label: `jobs finished per ${per}`,
    none: "No job finished in this window." });
  lines($("#chart-queue"), stats.queue || [], { label: "queue depth", keys: ["queued", "running"],
    none: "Nothing queued or running in this window." });
  lines($("#chart-cost"), stats.cost || [], { label: "cost per agent", format: (usd) => `$${usd.toFixed(usd < 1 ? 4 : 2)}`,
    none: "No agent reported a cost in this window." });
}

async function refreshPage() {
  if (!state.serverPages) return draw();
  const given = filters();
  try {
    const page = await fetchPage(given, state.offset, PAGE_SIZE, state.sort);
    if (page === null) state.serverPages = false;
    else {
      state.page = page;
      state.listProblem = page.error ? `the list: ${page.error}` : state.listProblem;
    }
  } catch (error) {
    state.listProblem = `the list: ${error}`;
  }
  draw();
}

async function refreshTree() {
  const jobId = state.jobId;
  if (!jobId) return;
  const pageRows = state.page ? state.page.jobs : [];
  const treeRows = state.tree ? state.tree.jobs : [];
  const known = (id) => {
    if (state.detail && state.detail.record && state.detail.record.job_id === id) return state.detail.record;
    return pageRows.find((j) => j.job_id === id) || treeRows.find((j) => j.job_id === id) || state.jobs.get(id);
  };
  const tree = await fetchTree(rootOf(jobId, known), [...state.jobs.values()]);
  if (state.jobId !== jobId) return;
  state.tree = tree;
  versions.tree += 1;
  draw();
}

function chartWindow() {
  return WINDOWS[$("#chart-window").value] || WINDOWS[DEFAULT_WINDOW];
}

async function refreshStats() {
  const span = chartWindow();
  const stats = await fetchStats([...state.jobs.values()], span);
  if (span !== chartWindow()) return;  // another window was picked meanwhile: its answer is on its way
  state.stats = { ...stats, window: span };
  draw();
}

function params() {
  const given = filters();
  const query = new URLSearchParams(pick(given, STREAM_KEYS));
  if (state.jobId) query.set("job", state.jobId);
  return query;
}

/** The address bar: every filter, the page and the open job, so a reload (or a shared link) shows the same. */
function remember() {
  const query = new URLSearchParams(filters());
  if (state.offset) query.set("offset", String(state.offset));
  if (state.sort !== DEFAULT_SORT) query.set("sort", state.sort);
  if ($("#chart-window").value !== DEFAULT_WINDOW) query.set("window", $("#chart-window").value);
  if (state.jobId) query.set("job", state.jobId);
  if (showingAll()) query.set("refusals", "all");
  history.replaceState(null, "", query.size ? `?${query}` : location.pathname);
}

const handlers = {
  snapshot(data) {
    Object.assign(state, { workspace: data.workspace, broker: data.broker, connected: data.connected });
    state.projector = data.projector;
    state.jobs = new Map(data.jobs.map((job) => [job.job_id, job]));
    versions.jobs += 1;
    state.agents = new Map(data.agents.map((a) => [a.agent_id, a]));
    state.refusals = data.refusals;
    state.detail = null;
    soon("page", 0, refreshPage);
    soon("stats", 0, refreshStats);
    if (data.detail) {
      state.jobId = data.detail.job_id;
      state.detail = { ...data.detail, events: [], seen: new Set(), output: "", logStart: data.detail.log_start };
      data.detail.events.forEach(addEvent);
      if (data.detail.record && data.detail.record.prompt_cut) fetchWhole(data.detail.job_id);
      if (data.detail.log_start > 0) fetchEarly(data.detail.job_id);
      soon("tree", 0, refreshTree);
    }
  },
  job({ record, shown, detail, waits }) {
    const before = state.jobs.get(record.job_id);
    versions.jobs += 1;
    if (shown) state.jobs.set(record.job_id, record);
    else state.jobs.delete(record.job_id);
    if (detail && state.detail && state.detail.job_id === detail.job_id) {
      state.detail.record = withWholePrompt(detail);
      state.detail.waits = waits;
    }
    // The page is read again when the change may move a row in or out of it or change what its columns say
    // the stream does not carry (runner, attempt, exit code): a new job or a new status. A job's other
    // changes (its output, heartbeats) show through the stream's row laid over the page's.
    // (The tree likewise: its statuses come from the stream's rows.)
    if (!before || before.status !== record.status || before.finished_at !== record.finished_at) {
      soon("page", 300, refreshPage);
      if (state.detail) soon("tree", 500, refreshTree);
      soon("stats", 2000, refreshStats);
    }
  },
  event({ job_id, event }) {
    if (state.detail && state.detail.job_id === job_id) addEvent({ event });
  },
  agent(status) {
    if (status.gone) state.agents.delete(status.agent_id);
    else state.agents.set(status.agent_id, status);
    // A runner came, went or took a job: why a queued row waits may have changed (the server says it anew).
    if (state.page && state.page.jobs.some((job) => QUEUED.has(job.status))) soon("page", 1000, refreshPage);
  },
  waits({ job_id, waits }) {
    if (state.detail && state.detail.job_id === job_id) state.detail.waits = waits;
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
  remember();
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
  const inTree = state.tree && state.tree.jobs.some((job) => job.job_id === jobId);
  if (!inTree && !(state.tree && state.tree.root === jobId)) {
    state.tree = null;
    versions.tree += 1;
  }
  state.jobId = jobId;
  state.verdict = "";
  $("#cancel-form").hidden = true;
  connect();
}

// A sortable header: a first click sorts by it (newest, longest or Z first), the next reverses.
function sortBy(key) {
  state.sort = state.sort === `-${key}` ? key : `-${key}`;
  state.offset = 0;
  drawSort();
  remember();
  soon("page", 0, refreshPage);
}

function drawSort() {
  for (const th of document.querySelectorAll("#jobs th[data-sort]")) {
    const key = th.dataset.sort;
    const order = state.sort === key ? "ascending" : state.sort === `-${key}` ? "descending" : "none";
    th.setAttribute("aria-sort", order);
  }
}

function turnPage(step) {
  const total = state.page ? state.page.total : 0;
  state.offset = Math.max(0, Math.min(state.offset + step * PAGE_SIZE, Math.max(0, total - 1)));
  remember();
  soon("page", 0, refreshPage);
}

function start() {
  const query = new URLSearchParams(location.search);
  const form = $("#filters");
  for (const key of [...STREAM_KEYS, ...PAGE_KEYS]) {
    const value = query.get(key);
    if (value) form.elements[key].value = key === "since" || key === "until" ? localInput(value) : value;
  }
  state.offset = Math.max(0, Number.parseInt(query.get("offset") || "0", 10) || 0);
  const sort = query.get("sort") || DEFAULT_SORT;
  if (SORT_KEYS.includes(sort.replace(/^-/, ""))) state.sort = sort;
  for (const th of document.querySelectorAll("#jobs th[data-sort]")) {
    th.tabIndex = 0;
    th.title = `sort by ${th.dataset.sort}`;
    th.addEventListener("click", () => sortBy(th.dataset.sort));
    th.addEventListener("keydown", (event) => {
      if (event.key === "Enter") sortBy(th.dataset.sort);
    });
  }
  drawSort();
  if (WINDOWS[query.get("window")]) $("#chart-window").value = query.get("window");
  $("#chart-window").addEventListener("change", () => {
    remember();
    soon("stats", 0, refreshStats);
  });
  state.jobId = query.get("job");
  output = new OutputPane($("#output"), $("#jump"));
  const refilter = () => {
    state.offset = 0;
    connect();
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    refilter();
  });
  form.elements.status.addEventListener("change", refilter);
  $("#clear-filters").addEventListener("click", () => {
    form.reset();
    refilter();
  });
  openOnPress($("#jobs tbody"), open);
  $("#prev").addEventListener("click", () => turnPage(-1));
  $("#next").addEventListener("click", () => turnPage(1));
  $("#cancel").addEventListener("click", () => askCancel(false));
  $("#cancel-tree").addEventListener("click", () => askCancel(true));
  $("#keep").addEventListener("click", () => {
    $("#cancel-form").hidden = true;
  });
  $("#cancel-form").addEventListener("submit", (event) => {
    event.preventDefault();
    cancel();
  });
  $("#retry").addEventListener("click", retry);
  const submitForm = $("#submit-form");
  $("#new-job").addEventListener("click", () => {
    submitForm.hidden = !submitForm.hidden;
    $("#new-job").setAttribute("aria-expanded", String(!submitForm.hidden));
    if (!submitForm.hidden) submitForm.elements.agent.focus();
  });
  submitForm.addEventListener("submit", (event) => {
    event.preventDefault();
    submit(submitForm);
  });
  setInterval(() => soon("stats", 0, refreshStats), STATS_EVERY_MS);
  setInterval(() => {
    refreshTimes();
    const record = state.detail && state.detail.record;
    if (record && !TERMINAL.has(record.status)) versions.clock += 1;  // the timeline of a running job grows
    draw();  // and the refused events of the last hour are those of the last hour
  }, TIMES_EVERY_MS);
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
  wireCopies(document.body);
  // The charts and the timeline are drawn at their boxes' widths (text at its own size): a box that changed
  // width (the window, a job opened beside the table) has them drawn again.
  onWidthChange($("#charts"), () => {
    if (state.stats) state.stats.drawn = false;
    drawn.timeline = "";
    draw();
  });
  $("#record").addEventListener("click", (event) => {  // a parent, retry_of or after job: open it here
    const link = event.target.closest("a[data-open]");
    if (!link) return;
    event.preventDefault();
    open(link.dataset.open);
  });
  document.querySelector("#earlier").addEventListener("click", earlier);
  connect();
}

start();
