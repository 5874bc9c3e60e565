// The refused-events panel. The main page shows the last hour's refusals, as fields, never a user's old typos
// for good: "dismiss" hides those shown until a newer one comes (remembered in this browser, per workspace),
// and "show all" lists every refusal the dashboard keeps (the newest 200; `<logs>/_rejected.jsonl` has them
// all). Above them, the projector's messages set aside, when it has any.

import { el, visible, when } from "./dom.js";
import { fieldList, oneLine, payloadFields } from "./fields.js";

const $ = (selector) => document.querySelector(selector);
export const RECENT_MS = 60 * 60 * 1000;
const shownAll = { on: new URLSearchParams(location.search).get("refusals") === "all" };

const dismissKey = (workspace) => `mam.refusals.dismissed.${workspace}`;
const at = (refusal) => Date.parse(refusal.received_at || "") || 0;

function dismissedAt(workspace) {
  try {
    return Number(localStorage.getItem(dismissKey(workspace))) || 0;
  } catch (error) {
    return 0;  // storage off: nothing is remembered
  }
}

/** The refusals the main page shows: received in the last hour and after the last dismiss. */
export function recent(refusals, workspace, now = Date.now()) {
  const since = Math.max(now - RECENT_MS, dismissedAt(workspace));
  return refusals.filter((r) => at(r) > since);
}

function payload(r) {
  const fields = payloadFields(r.payload);
  if (fields) return fieldList(fields, { width: 60 });
  const text = String(r.payload ?? "");
  return text ? el("span", { class: "fields" }, el("span", { class: "field" }, el("span", { class: "k" }, "payload"),
    " ", el("span", { class: "v", title: text.slice(0, 2000) }, oneLine(text, 100)))) : "";
}

function item(r) {
  if (typeof r.suppressed === "number") {  // the projector's summary of refusals past its rate
    return el("li", { class: "summary" }, el("span", { class: "reason" },
      `${r.suppressed} more refusal${r.suppressed === 1 ? "" : "s"} past the rate, not listed one by one`),
      " ", el("span", { class: "quiet" }, r.source ? `from ${r.source} ` : ""), when(r.received_at, "span"));
  }
  const where = r.job_id ? `job ${r.job_id}` : r.topic || "";  // a job's topic says no more than its id
  return el("li", {},
    el("span", { class: "reason", title: r.reason || "" }, r.reason || "refused"),
    el("span", { class: "meta quiet", title: r.topic || "" }, `${where} · `, when(r.received_at, "span")),
    payload(r));
}

/** Whether the panel lists every refusal kept (the address bar says so: `refusals=all`). */
export function showingAll() {
  return shownAll.on;
}

/** Draws the panel from app.js's state; `redraw` after a dismiss or a toggle. */
export function drawRefusals(state, redraw) {
  const all = state.refusals;
  const shown = shownAll.on ? all : recent(all, state.workspace);
  $("#refusal-count").textContent = shownAll.on ? `all ${all.length} kept` : shown.length ? `${shown.length} in the last hour` : "";
  drawSetAside(state.projector);
  const list = $("#refusals");
  list.replaceChildren(...shown.map(item));
  const empty = $("#no-refusals");
  empty.hidden = shown.length > 0;
  const dismissed = dismissedAt(state.workspace) > Date.now() - RECENT_MS;
  empty.textContent = !all.length ? "None: the projector has recorded every event it was sent."
    : dismissed ? "None since you dismissed them." : "None in the last hour.";
  const toggle = $("#refusals-all");
  toggle.hidden = all.length === 0 || (!shownAll.on && shown.length === all.length);
  toggle.textContent = shownAll.on ? "show the last hour's" : `show all ${all.length}`;
  toggle.onclick = (event) => {
    event.preventDefault();
    shownAll.on = !shownAll.on;
    redraw();
  };
  const dismiss = $("#refusals-dismiss");
  dismiss.hidden = shownAll.on || shown.length === 0;
  dismiss.onclick = () => {
    try {
      localStorage.setItem(dismissKey(state.workspace), String(Math.max(...shown.map(at))));
    } catch (error) {
      // storage off: nothing to remember it in
    }
    redraw();
  };
}

// Messages the projector failed to handle (a projector fault, not a refusal): its status counts the ones in
// <logs>/_set_aside.jsonl, across its restarts, and says why (docs/dashboard.md).
function drawSetAside(projector) {
  const aside = projector && projector.set_aside;
  const setAside = $("#set-aside");
  setAside.hidden = !aside;
  if (!aside) return;
  const reasons = projector.set_aside_reasons || [];
  setAside.replaceChildren(
    el("strong", {}, `${aside} message${aside === 1 ? "" : "s"} set aside`),
    ` (a projector fault, not a refusal): ${visible(reasons.join("; "))}. `,
    el("code", {}, "mam set-aside"), " lists them, ", el("code", {}, "mam set-aside --replay --all"),
    " tries them again.");
}
