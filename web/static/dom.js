// Building DOM from record data: text always goes through textContent, never innerHTML, and is shown
// `visible`: its control characters and bidi overrides escaped, never obeyed.

// What mam/contract/terminal.py escapes: C0 controls but tab and newline, DEL and C1, the bidi marks,
// embeddings, overrides and isolates, and the line and paragraph separators. A prompt, a topic, a runner's
// host or a refusal's reason holding U+202E would otherwise reverse the text after it on the page.
const HIDDEN = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

/** `text` with what would hide or reorder it written out: `\x1b`, `\u202e` (as `mam show` prints them). */
export function visible(text) {
  return String(text ?? "").replace(HIDDEN, (ch) => {
    const code = ch.charCodeAt(0);
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`;
  });
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-") || key.startsWith("aria-")) node.setAttribute(key, value);
    else if (key === "title") node.title = visible(value);
    else node[key] = value;
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(visible(child)));
  }
  return node;
}

export function row(cells, attrs = {}) {
  return el("tr", attrs, ...cells.map((cell) => (cell instanceof Node && cell.tagName === "TD" ? cell : el("td", {}, cell))));
}

export function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

// "3 min ago": how long ago `iso` was, in words; `absolute` gives the local time for a tooltip.
export function ago(iso) {
  if (!iso) return "";
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (Number.isNaN(seconds)) return String(iso);
  if (seconds < 5) return "just now";
  if (seconds < 60) return `${Math.floor(seconds)} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min ago`;
  return `${Math.floor(seconds / 86400)} d ago`;
}

export function absolute(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? String(iso) : date.toLocaleString();
}

// A cell (or another element) that says "3 min ago" and shows the local time on hover; `data-at` keeps
// the moment so a timer can refresh the words (refreshTimes).
export function when(iso, tag = "td") {
  return el(tag, { class: "when", title: absolute(iso), "data-at": iso || "" }, ago(iso));
}

export function refreshTimes(root = document) {
  for (const node of root.querySelectorAll(".when[data-at]")) {
    const words = ago(node.dataset.at);
    if (node.textContent !== words) node.textContent = words;
  }
}

// "2.5 s", "3 min 4 s", "1 h 2 min": a duration in seconds, in words.
export function duration(seconds) {
  if (typeof seconds !== "number" || !Number.isFinite(seconds) || seconds < 0) return "";
  if (seconds < 10) return `${seconds.toFixed(1)} s`;
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ${Math.round(seconds % 60)} s`;
  return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min`;
}

// 1234 -> "1,234" (the same in every locale, so the tests and the page agree).
export function count(n) {
  return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
}

export function short(text, width = 60) {
  const flat = (text || "").split(/\s+/).join(" ").trim();
  return flat.length <= width ? flat : flat.slice(0, width - 1) + "…";
}

// A finished job whose agent was refused tool calls at its permission level does not read as a plain
// success: `succeeded, 2 denied` (as `mam show` and `mam jobs` say it); `denied` lists the calls.
export function denied(job) {
  const denials = job && Array.isArray(job.denials) ? job.denials : [];
  return job && (job.status === "succeeded" || job.status === "failed") ? denials : [];
}

export function statusText(job) {
  const denials = denied(job);
  return denials.length ? `${job.status}, ${denials.length} denied` : job.status;
}

/** Calls `then` whenever `node`'s width changes (not its height: redrawing what is inside may change that). */
export function onWidthChange(node, then) {
  let width = 0;
  new ResizeObserver(([entry]) => {
    const now = Math.round(entry.contentRect.width);
    if (now === width) return;
    width = now;
    then();
  }).observe(node);
}

// A runner records a process stopped by a signal as its negative number (Python's subprocess: -15 for
// SIGTERM); a person reads the signal's name.
const SIGNALS = {
  1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 5: "SIGTRAP", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
  9: "SIGKILL", 10: "SIGUSR1", 11: "SIGSEGV", 12: "SIGUSR2", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM",
  24: "SIGXCPU", 25: "SIGXFSZ",
};

/** An exit code as a cell shows it: the signal's name for one stopped by a signal, else the number. */
export function exitText(code) {
  if (typeof code !== "number") return "";
  return code < 0 ? SIGNALS[-code] || `signal ${-code}` : String(code);
}

/** How the job's process ended, in words: `stopped by SIGTERM`, `exit code 1`. */
export function exitWords(code) {
  if (typeof code !== "number") return "";
  return code < 0 ? `stopped by ${exitText(code)}` : `exit code ${code}`;
}
