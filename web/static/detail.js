// The open job's detail: its log's events as they come and page by page before them, the lifecycle events
// of its log's start for the timeline, and its whole prompt when the stream's record cut it. `state` and
// `draw` are app.js's; every function here works on `state.detail`.

// The timeline's events: those the detail holds and, when its log is longer than the page it opened with,
// the lifecycle events of the log's start (read once from GET /api/jobs/ID/events), so a long job's
// timeline still begins where it was submitted.
export function timelineEvents(detail) {
  if (!detail.early || !detail.early.length) return detail.events;
  const held = new Set(detail.events.map((entry) => entry.event && entry.event.id).filter(Boolean));
  const first = detail.events.length ? detail.events[0].seq : undefined;
  const before = detail.early.filter((entry) => !(entry.event && held.has(entry.event.id)) &&
    (first === undefined || first === null || entry.seq < first));
  return [...before, ...detail.events];
}

/** The detail's loaders, on app.js's `state`, calling `draw` when the detail changed. */
export function detailLoader(state, draw) {
  async function fetchEarly(jobId) {
    try {
      const response = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/events?limit=1000`);
      if (!response.ok) return;
      const page = await response.json();
      const detail = state.detail;
      if (!detail || detail.job_id !== jobId) return;
      const quiet = new Set(["output", "heartbeat", "progress"]);
      detail.early = page.events.filter((entry) => entry.event && !quiet.has(entry.event.type));
      draw();
    } catch (error) {
      // The timeline shows the events the detail holds.
    }
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

  return { addEvent, earlier, fetchEarly, fetchWhole, withWholePrompt };
}
