// Which of the job table's columns show. The job, its status, agent, submitted and the prompt always; each
// other one only while a row of the page has a value for it, and only as long as the prompt keeps room to be
// read (PROMPT_SHARE of the table, at least PROMPT_MIN pixels): the least read step aside first. A column that
// steps aside gets the class `hide-<name>` on the table (style.css hides its cells); widths are set here.

import { ran } from "./record.js";

const PROMPT_MIN = 320;
const PROMPT_SHARE = 0.4;
const PADDING = 1;  // em: a cell's padding, left and right (style.css), on top of its width

/** Always shown: [class, width in em]. The prompt takes what is left. */
const FIXED = [["c-job", 6], ["c-status", 6.5], ["c-agent", 6], ["c-when", 7]];

/** The others, in the order they step aside: [class, width in em, whether a row has a value for it]. */
const OPTIONAL = [
  ["c-parent", 6, (job) => Boolean(job.parent)],
  ["c-labels", 9, (job) => Object.keys(job.labels || {}).length > 0],
  ["c-attempt", 2.5, (job) => typeof job.attempt === "number" && job.attempt > 1],
  ["c-runner", 9, (job) => Boolean(job.runner)],
  ["c-cost", 4.5, (job) => typeof (job.usage ? job.usage.cost_usd : job.cost_usd) === "number"],
  ["c-duration", 5, (job) => ran(job) !== undefined],
  ["c-exit", 4.5, (job) => typeof job.exit_code === "number"],
];

/** The optional columns to show for `rows` in a table `width` pixels wide, `em` pixels to the em. */
export function shownColumns(rows, width, em) {
  const px = (w) => (w + PADDING) * em;
  const room = width - Math.max(PROMPT_MIN, width * PROMPT_SHARE) - px(0) - FIXED.reduce((sum, [, w]) => sum + px(w), 0);
  const wanted = OPTIONAL.filter(([, , has]) => rows.some(has));
  // Drop from the front (the least read) until the rest fit.
  let used = wanted.reduce((sum, [, w]) => sum + px(w), 0);
  while (wanted.length && used > room) used -= px(wanted.shift()[1]);
  return new Set(wanted.map(([name]) => name));
}

/** Sets the headers' widths once, and which columns show for `rows` (a class per hidden one). */
export function fitColumns(table, rows) {
  if (!table.dataset.sized) {
    for (const [name, w] of [...FIXED, ...OPTIONAL]) {
      const th = table.querySelector(`thead th.${name}`);
      if (th) th.style.width = `${w}em`;  // the CSSOM, which the content security policy allows
    }
    table.dataset.sized = "yes";
  }
  const em = parseFloat(getComputedStyle(table).fontSize) || 14;
  const box = table.parentElement;  // its width, not the table's (which grows when its columns do not fit)
  const style = getComputedStyle(box);
  const width = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
  const shown = shownColumns(rows, width, em);
  for (const [name] of OPTIONAL) table.classList.toggle(`hide-${name.slice(2)}`, !shown.has(name));
}
