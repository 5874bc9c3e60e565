// An event's or a refused payload's fields as a person reads them: `name value` pairs, never JSON. A nested
// object reads as its own pairs (`git commit a1b2c3, branch main`), a list as its items, a time as your local
// time, a long value on one line cut with "…" (the whole value on hover). Every value is text (dom.js `el`).

import { absolute, el } from "./dom.js";

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?$/;
const LONGEST = 80;
const HOVER = 2000;

/** Whether `value` is an ISO 8601 time (shown as your local time, never raw). */
export function isTime(value) {
  return typeof value === "string" && ISO_TIME.test(value) && !Number.isNaN(Date.parse(value));
}

const given = (value) => value !== null && value !== undefined && value !== "" &&
  !(typeof value === "object" && Object.keys(value).length === 0);

/** A value in words: a time local, a list as its items, an object as `key value` pairs. */
export function words(value) {
  if (!given(value)) return "";
  if (typeof value === "string") return isTime(value) ? absolute(value) : value;
  if (typeof value !== "object") return String(value);
  if (Array.isArray(value)) return value.map(words).join(Array.isArray(value[0]) || typeof value[0] === "object" ? "; " : ", ");
  return Object.entries(value).filter(([, v]) => given(v)).map(([k, v]) => `${k} ${words(v)}`).join(", ");
}

/** `text` on one line (runs of white space as one space), at most `width` characters. */
export function oneLine(text, width = LONGEST) {
  const flat = String(text).replace(/\s+/g, " ").trim();
  return flat.length <= width ? flat : `${flat.slice(0, width - 1)}…`;
}

/** The pairs of `object` (its keys in `skip` and empty values left out) as a span of `.field`s: a `.k` (the
 * key) and a `.v` (its value in words). */
export function fieldList(object, { skip = [], width = LONGEST } = {}) {
  const pairs = Object.entries(object || {}).filter(([key, value]) => !skip.includes(key) && given(value));
  return el("span", { class: "fields" }, ...pairs.map(([key, value]) => {
    const text = words(value);
    const shown = oneLine(text, width);
    return el("span", { class: "field", "data-key": key, title: shown === text ? "" : text.slice(0, HOVER) },
      el("span", { class: "k" }, key), " ", el("span", { class: "v" }, shown));
  }));
}

// A top-level `"key": value` pair of a JSON text, a scalar value: what can be read of a payload the projector
// cut short (it keeps the first part of a refused payload), where JSON.parse reads nothing.
const PAIR = /"([A-Za-z_][A-Za-z0-9_]*)"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)/g;

/** A refused payload's fields: its JSON object's, or the scalar pairs a cut one still holds; null for text
 * that is no JSON object (shown as it is). */
export function payloadFields(payload) {
  const text = String(payload ?? "");
  try {
    const parsed = JSON.parse(text);
    return parsed && typeof parsed === "object" && !Array.isArray(parsed) ? parsed : null;
  } catch (error) {
    if (!text.trimStart().startsWith("{")) return null;
  }
  const found = {};
  for (const [, key, value] of text.matchAll(PAIR)) {
    if (!(key in found)) found[key] = JSON.parse(value);
  }
  return Object.keys(found).length ? found : null;
}
