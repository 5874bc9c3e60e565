// Charts as plain SVG, no library: stacked bars (jobs finished per bucket by outcome) and lines (queue
// depth, cost per agent). Each chart takes points [{t: ISO time, <series>: number, ...}] and draws into
// an element it empties first; every mark has a <title> with its numbers, every value is set as text.

const SVG = "http://www.w3.org/2000/svg";
const HEIGHT = 100;  // low enough that the job table is in the first screen under the charts
const PAD = { left: 60, right: 8, top: 8, bottom: 22 };
const OUTCOME_COLOURS = {
  succeeded: "#2e7d32", failed: "#c62828", cancelled: "#6d4c41", timed_out: "#ef6c00", lost: "#8e0000",
  queued: "#ef6c00", running: "#1565c0",
};
const PALETTE = ["#1565c0", "#8e24aa", "#00897b", "#f9a825", "#5d4037", "#3949ab", "#d81b60", "#7cb342"];

function svg(tag, attrs = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  if (text !== null) node.textContent = text;
  return node;
}

function colour(key, index) {
  return OUTCOME_COLOURS[key] || PALETTE[index % PALETTE.length];
}

/** The series a chart's points name with a value other than 0 somewhere (every key but `t`), in the order first
seen: an outcome nothing ended in stays out of the legend. */
export function seriesOf(points) {
  const keys = [];
  for (const point of points) {
    for (const [key, value] of Object.entries(point)) if (key !== "t" && Number(value) && !keys.includes(key)) keys.push(key);
  }
  return keys;
}

function clock(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

/** A chart is drawn at its box's own width in CSS pixels, so its axis labels are never scaled down. */
function widthOf(target) {
  return Math.max(200, Math.round(target.clientWidth || 480));
}

function frame(target, label, max, points, format, width) {
  const root = svg("svg", { viewBox: `0 0 ${width} ${HEIGHT}`, width: width, height: HEIGHT, role: "img", class: "chart",
                            "aria-label": label });
  const bottom = HEIGHT - PAD.bottom;
  root.append(
    svg("line", { x1: PAD.left, y1: bottom, x2: width - PAD.right, y2: bottom, class: "axis" }),
    svg("line", { x1: PAD.left, y1: PAD.top, x2: PAD.left, y2: bottom, class: "axis" }),
    svg("text", { x: PAD.left - 4, y: PAD.top + 8, "text-anchor": "end", class: "tick" }, format(max)),
    svg("text", { x: PAD.left - 4, y: bottom, "text-anchor": "end", class: "tick" }, format(0)),
  );
  if (points.length) {
    root.append(
      svg("text", { x: PAD.left, y: HEIGHT - 6, class: "tick" }, clock(points[0].t)),
      svg("text", { x: width - PAD.right, y: HEIGHT - 6, "text-anchor": "end", class: "tick" }, clock(points.at(-1).t)),
    );
  }
  target.replaceChildren(root);
  return root;
}

function legend(target, keys) {
  const list = document.createElement("ul");
  list.className = "legend";
  keys.forEach((key, i) => {
    const item = document.createElement("li");
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.dataset.colour = colour(key, i);
    item.append(swatch, document.createTextNode(key));
    list.append(item);
  });
  target.append(list);
  // CSP forbids inline style attributes; colours set through the CSSOM are allowed.
  for (const swatch of list.querySelectorAll(".swatch")) swatch.style.background = swatch.dataset.colour;
}

function empty(target, words) {
  const note = document.createElement("p");
  note.className = "quiet";
  note.textContent = words;
  target.replaceChildren(note);
}

const whole = (n) => String(Math.round(n));

/** Stacked bars, a bar per point, a segment per series (data-series names it). */
export function stackedBars(target, points, { label, keys = seriesOf(points), format = whole, none = "" } = {}) {
  const totals = points.map((p) => keys.reduce((sum, key) => sum + (Number(p[key]) || 0), 0));
  const max = Math.max(0, ...totals);
  if (!points.length || max === 0) return empty(target, none || `${label}: nothing yet`);
  const width = widthOf(target);
  const root = frame(target, label, max, points, format, width);
  const plotWidth = width - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const step = plotWidth / points.length;
  points.forEach((point, i) => {
    let y = HEIGHT - PAD.bottom;
    keys.forEach((key, k) => {
      const value = Number(point[key]) || 0;
      if (!value) return;
      const height = (value / max) * plotHeight;
      y -= height;
      const bar = svg("rect", {
        x: (PAD.left + i * step + step * 0.1).toFixed(1), y: y.toFixed(1), width: Math.max(1, step * 0.8).toFixed(1),
        height: height.toFixed(1), fill: colour(key, k), class: "bar", "data-series": key,
      });
      bar.append(svg("title", {}, `${clock(point.t)} ${key}: ${format(value)}`));
      root.append(bar);
    });
  });
  legend(target, keys);
}

/** Lines, one per series (data-series names it), over the points' times. */
export function lines(target, points, { label, keys = seriesOf(points), format = whole, none = "" } = {}) {
  const max = Math.max(0, ...points.flatMap((p) => keys.map((key) => Number(p[key]) || 0)));
  if (!points.length || max === 0) return empty(target, none || `${label}: nothing yet`);
  const width = widthOf(target);
  const root = frame(target, label, max, points, format, width);
  const plotWidth = width - PAD.left - PAD.right;
  const plotHeight = HEIGHT - PAD.top - PAD.bottom;
  const x = (i) => PAD.left + (points.length === 1 ? plotWidth / 2 : (i / (points.length - 1)) * plotWidth);
  const y = (v) => HEIGHT - PAD.bottom - (v / max) * plotHeight;
  keys.forEach((key, k) => {
    const coords = points.map((p, i) => `${x(i).toFixed(1)},${y(Number(p[key]) || 0).toFixed(1)}`);
    const line = svg("polyline", { points: coords.join(" "), fill: "none", stroke: colour(key, k), class: "line",
                                   "data-series": key });
    line.append(svg("title", {}, `${key}: up to ${format(Math.max(...points.map((p) => Number(p[key]) || 0)))}`));
    root.append(line);
    points.forEach((p, i) => {
      if (!Number(p[key])) return;
      const dot = svg("circle", { cx: x(i).toFixed(1), cy: y(Number(p[key])).toFixed(1), r: 2, fill: colour(key, k),
                                  "data-series": key });
      dot.append(svg("title", {}, `${clock(p.t)} ${key}: ${format(Number(p[key]))}`));
      root.append(dot);
    });
  });
  legend(target, keys);
}
