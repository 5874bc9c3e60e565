// A job's timeline: its events on a time axis, as SVG. Bands show the phases (queued, running, waiting)
// attempt by attempt; a mark per event (class "event", data-type its type) with a <title> naming it and
// when; the lifecycle events are labelled, output and heartbeats are small ticks.

import { absolute } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const WIDTH = 640;
const HEIGHT = 96;
const LEFT = 8;
const RIGHT = 8;
const BAND_Y = 44;
const BAND_H = 14;
const QUIET = new Set(["output", "heartbeat", "progress"]);
const ENDS = new Set(["succeeded", "failed", "cancelled", "timed_out", "lost", "released", "retrying"]);

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

function timeOf(entry) {
  const event = entry.event || {};
  const at = Date.parse(event.ts || entry.received_at || "");
  return Number.isNaN(at) ? null : at;
}

/** The phases the events describe: [{phase, from, to, attempt}], `to` null while it lasts. */
export function phases(events) {
  const out = [];
  let open = null;
  let attempt = 1;
  const start = (phase, at) => {
    if (open) open.to = at;
    open = { phase, from: at, to: null, attempt };
    out.push(open);
  };
  for (const entry of events) {
    const type = entry.event && entry.event.type;
    const at = timeOf(entry);
    if (at === null) continue;
    if (type === "retrying") attempt = entry.event.attempt || attempt + 1;
    if (type === "submitted" || type === "retrying" || type === "released" || type === "unblocked") start("queued", at);
    else if (type === "claimed") start("claimed", at);
    else if (type === "started" || type === "input_provided" || type === "input_withdrawn") start("running", at);
    else if (type === "input_requested") start("waiting", at);
    if (ENDS.has(type) && type !== "retrying" && type !== "released" && open) {
      open.to = at;
      open = null;
    }
  }
  return out;
}

export function drawTimeline(target, events, finished) {
  const timed = events.filter((entry) => timeOf(entry) !== null);
  if (!timed.length) {
    target.replaceChildren();
    return;
  }
  const first = Math.min(...timed.map(timeOf));
  const last = Math.max(...timed.map(timeOf), finished ? 0 : Date.now());
  const span = Math.max(last - first, 1000);
  const x = (at) => LEFT + ((at - first) / span) * (WIDTH - LEFT - RIGHT);
  const root = svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, role: "img", class: "timeline",
                            "aria-label": "the job's events over time" });
  root.append(svg("line", { x1: LEFT, y1: BAND_Y + BAND_H + 6, x2: WIDTH - RIGHT, y2: BAND_Y + BAND_H + 6, class: "axis" }));
  const right = finished ? last : first + span;  // an unfinished phase runs to the axis' end
  for (const band of phases(timed)) {
    const to = band.to ?? right;
    const rect = svg("rect", { x: x(band.from).toFixed(1), y: BAND_Y, width: Math.max(1, x(to) - x(band.from)).toFixed(1),
                               height: BAND_H, class: `phase ${band.phase}`, "data-phase": band.phase });
    rect.append(svg("title", {}, `${band.phase} (attempt ${band.attempt}) from ${absolute(new Date(band.from).toISOString())}`));
    root.append(rect);
  }
  let lane = 0;
  for (const entry of timed) {
    const type = entry.event.type;
    const at = timeOf(entry);
    const title = svg("title", {}, `${type} at ${absolute(new Date(at).toISOString())}`);
    if (QUIET.has(type)) {
      const tick = svg("line", { x1: x(at).toFixed(1), x2: x(at).toFixed(1), y1: BAND_Y + BAND_H + 2, y2: BAND_Y + BAND_H + 10,
                                 class: `event quiet-event ${type}`, "data-type": type });
      tick.append(title);
      root.append(tick);
      continue;
    }
    const y = lane % 2 === 0 ? 14 : 30;
    lane += 1;
    const mark = svg("g", { class: `event ${type}`, "data-type": type });
    mark.append(
      svg("line", { x1: x(at).toFixed(1), x2: x(at).toFixed(1), y1: y + 2, y2: BAND_Y, class: "stem" }),
      svg("circle", { cx: x(at).toFixed(1), cy: BAND_Y + BAND_H / 2, r: 4 }),
      svg("text", { x: x(at).toFixed(1), y, "text-anchor": x(at) > WIDTH - 80 ? "end" : "start" }, type),
      title,
    );
    root.append(mark);
  }
  const ends = [first, last].map((at) => new Date(at).toLocaleTimeString());
  root.append(
    svg("text", { x: LEFT, y: HEIGHT - 4, class: "tick" }, ends[0]),
    svg("text", { x: WIDTH - RIGHT, y: HEIGHT - 4, class: "tick", "text-anchor": "end" }, ends[1]),
  );
  target.replaceChildren(root);
}
