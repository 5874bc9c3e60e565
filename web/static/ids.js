// Ids as people tell them apart: a generated job id (`job-20261204-120000-5732ef`) by its short id, the random
// suffix the CLI takes for it (`mam show 5732ef`); a runner id (`shell-<host>-<pid>`) by its host and pid
// rather than a cut prefix. The whole id is always on hover (title) and one click from the clipboard.

import { el } from "./dom.js";

const GENERATED = /^job-\d{8}-\d{6}-([0-9a-f]{6})$/;

/** A generated job id's short id (its unique suffix); any other id whole. */
export function shortId(jobId) {
  const found = GENERATED.exec(jobId || "");
  return found ? found[1] : jobId || "";
}

/** A runner id in at most `width` characters, keeping what tells runners apart: without its agent's name
(the agent is shown beside it) and, when still too long, the start of the rest, "…", and its last part. */
export function runnerLabel(runnerId, agent = "", width = 18) {
  const id = runnerId || "";
  let rest = agent && id.startsWith(`${agent}-`) && id.length > agent.length + 1 ? id.slice(agent.length + 1) : id;
  if (rest.length <= width) return rest;
  const dash = rest.lastIndexOf("-");
  const tail = dash > 0 && rest.length - dash <= width / 2 ? rest.slice(dash) : rest.slice(-Math.floor(width / 2));
  rest = `${rest.slice(0, width - tail.length - 1)}…${tail}`;
  return rest;
}

/** Copies `text`: the async clipboard where the page may use it (a loopback or https origin), else a
selection and execCommand. Answers whether it was copied. */
export async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch (error) {
    const area = el("textarea", { value: text, readOnly: true });
    area.style.position = "fixed";
    area.style.opacity = "0";
    document.body.append(area);
    area.select();
    const done = document.execCommand("copy");
    area.remove();
    return done;
  }
}

/** A small button that copies `id` (its glyph is CSS, so the cell's text stays the id). */
export function copyButton(id, what = "id") {
  return el("button", { type: "button", class: "copy", title: `copy the ${what} ${id}`, "data-copy": id,
                        "aria-label": `copy ${what}` });
}

/** An id shown as `shown`, the whole id on hover, with a copy button; `tag` the element (a td in a table),
`what` names the id for the button, `extra` more classes. */
export function idLabel(id, shown, { tag = "span", what = "id", extra = "" } = {}) {
  return el(tag, { class: `id${extra ? ` ${extra}` : ""}`, title: id, "data-id": id },
    el("span", { class: "shown" }, shown), copyButton(id, what));
}

/** One listener for every copy button in `root`: copies, says so for a moment, and stops the click there
(a copy button in a table row does not open the row). */
export function wireCopies(root) {
  root.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-copy]");
    if (!button) return;
    event.stopPropagation();
    event.preventDefault();
    const done = await copy(button.dataset.copy);
    button.classList.toggle("copied", done);
    button.dataset.copied = done ? "yes" : "no";
    setTimeout(() => button.classList.remove("copied"), 1200);
  }, true);
}
