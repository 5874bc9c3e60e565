// A job's timeline: its events on a time axis, as SVG. Bands show the phases (queued, running, waiting)
// attempt by attempt; a mark per event (class "event", data-type its type) with a <title> naming it and
// when; the lifecycle events are labelled (labels never overlap: see lanes; a label moved right of its
// event is joined to it by a leader line, drawn under every label), output and heartbeats are small ticks
// on the axis.

import { absolute, duration } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const LEFT = 8;
const RIGHT = 8;
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

// Labels go in lanes above the band: each in the first lane where it clears the labels already there, at
// its event or moved right of it by at most SHIFT (a leader line joins them), so no two overlap however close
// their events are (events 10 ms apart spread out along the axis instead of piling up at its left edge); one
// that finds no room is a mark with its name on hover.
const LANE_H = 17;  // more than a 12px label's box is high, so labels in neighbouring lanes never touch
const LANES = 4;
const CHAR_W = 7.2;  // a generous width per character of a 12px label, if the page cannot measure one
const GAP = 8;
const SHIFT = 140;

/** Lays labels out: [{at (x), size (width)}] in time order -> for each, its lane (0 = nearest the band) and
 * left edge, or null. Labels in one lane never overlap; lanes are LANE_H apart. */
export function lanes(labels, width) {
  const ends = [];  // per lane, the right edge of its last label
  return labels.map(({ at, size }) => {
    const earliest = Math.min(Math.max(at, 0), Math.max(0, width - size));
    for (let lane = 0; lane < LANES; lane += 1) {
      const left = ends[lane] === undefined ? earliest : Math.max(earliest, ends[lane] + GAP);
      if (left - earliest <= SHIFT && left + size <= width) {
        ends[lane] = left + size;
        return { lane, left };
      }
    }
    return null;
  });
}

/** Draws the timeline at the target's own width in CSS pixels (text is never scaled down). */
export function drawTimeline(target, events, finished) {
  const timed = events.filter((entry) => timeOf(entry) !== null);
  if (!timed.length) {
    target.replaceChildren();
    return;
  }
  const width = Math.max(320, Math.round(target.clientWidth || 640));
  const first = Math.min(...timed.map(timeOf));
  const last = Math.max(...timed.map(timeOf), finished ? 0 : Date.now());
  const span = Math.max(last - first, 1);  // events 10 ms apart spread over the whole axis
  const x = (at) => LEFT + ((at - first) / span) * (width - LEFT - RIGHT);
  const root = svg("svg", { role: "img", class: "timeline", "aria-label": "the job's events over time" });
  const axis = svg("line", { x1: LEFT, x2: width - RIGHT, class: "axis" });
  root.append(axis);
  const leaders = svg("g", { class: "leaders" });  // under the marks and their labels
  root.append(leaders);
  const bands = phases(timed).map((band) => {
    const to = band.to ?? (finished ? last : first + span);  // an unfinished phase runs to the axis' end
    const rect = svg("rect", { x: x(band.from).toFixed(1), width: Math.max(1, x(to) - x(band.from)).toFixed(1),
                               height: BAND_H, class: `phase ${band.phase}`, "data-phase": band.phase });
    rect.append(svg("title", {}, `${band.phase} (attempt ${band.attempt}) from ${absolute(new Date(band.from).toISOString())}`));
    root.append(rect);
    return rect;
  });
  const ticks = [];
  const labelled = [];
  for (const entry of timed) {
    const type = entry.event.type;
    const at = timeOf(entry);
    const title = svg("title", {}, `${type} at ${absolute(new Date(at).toISOString())} (+${offset(at - first)})`);
    if (QUIET.has(type)) {
      const tick = svg("line", { x1: x(at).toFixed(1), x2: x(at).toFixed(1), class: `event quiet-event ${type}`,
                                 "data-type": type });
      tick.append(title);
      root.append(tick);
      ticks.push(tick);
      continue;
    }
    const mark = svg("g", { class: `event ${type}`, "data-type": type });
    const stem = svg("line", { x1: x(at).toFixed(1), x2: x(at).toFixed(1), class: "stem" });
    const dot = svg("circle", { cx: x(at).toFixed(1), r: 4 });
    const label = svg("text", { x: x(at).toFixed(1), class: "label" }, type);
    leaders.append(stem);
    mark.append(dot, label, title);
    root.append(mark);
    labelled.push({ mark, stem, dot, label, at: x(at), type });
  }
  const times = [
    svg("text", { x: LEFT, class: "tick" }, new Date(first).toLocaleTimeString()),
    svg("text", { x: width / 2, class: "tick", "text-anchor": "middle" }, `${offset(last - first)} in all`),
    svg("text", { x: width - RIGHT, class: "tick", "text-anchor": "end" }, new Date(last).toLocaleTimeString()),
  ];
  root.append(...times);
  target.replaceChildren(root);  // in the page, so each label's drawn width can be measured
  const measured = labelled.map((l) => l.label.getComputedTextLength() || l.type.length * CHAR_W);
  const placed = lanes(labelled.map((l, i) => ({ at: l.at, size: measured[i] })), width - RIGHT);
  const used = Math.max(1, ...placed.map((p) => (p ? p.lane + 1 : 0)));
  const bandY = 6 + used * LANE_H + 6;
  const axisY = bandY + BAND_H + 6;
  const height = axisY + 22;
  for (const [key, value] of Object.entries({ viewBox: `0 0 ${width} ${height}`, width, height })) root.setAttribute(key, value);
  axis.setAttribute("y1", axisY);
  axis.setAttribute("y2", axisY);
  for (const rect of bands) rect.setAttribute("y", bandY);
  for (const tick of ticks) {
    tick.setAttribute("y1", axisY - 4);
    tick.setAttribute("y2", axisY + 4);
  }
  labelled.forEach((l, i) => {
    l.dot.setAttribute("cy", bandY + BAND_H / 2);
    const place = placed[i];
    if (!place) {  // no lane had room: its name is on hover
      l.label.remove();
      l.stem.remove();
      l.mark.setAttribute("data-unlabelled", "");
      return;
    }
    const y = bandY - 4 - place.lane * LANE_H;
    l.label.setAttribute("x", place.left.toFixed(1));
    l.label.setAttribute("y", y);
    l.stem.setAttribute("x2", Math.max(l.at, place.left + 3).toFixed(1));  // to the label's start when moved
    l.stem.setAttribute("y2", y + 2);
    l.stem.setAttribute("y1", bandY);
  });
  for (const tick of times) tick.setAttribute("y", height - 5);
}

/** A span of milliseconds in words: `12 ms`, `3.4 s`, `2 min 5 s`. */
function offset(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return duration(ms / 1000);
}
