// Terminal output with its colours: SGR escape sequences (ESC [ ... m) become spans with classes, the
// text stays text (createTextNode), every other escape sequence is dropped so no raw ESC box shows.
//
// Classes: ansi-fg-0..7 (30-37), ansi-fg-8..15 (90-97), ansi-bg-0..7 (40-47), ansi-bg-8..15 (100-107),
// ansi-bold (1), ansi-dim (2), ansi-italic (3), ansi-underline (4); 0 (or an empty ESC[m) resets.

const ESC = "\u001b";
// A complete CSI sequence (parameters, intermediates, final byte), an OSC string, or another escape
// (intermediates, then a final byte: ESC ( B, ESC 7, ESC M ...).
const SEQUENCE = /\u001b(?:\[([0-?]*)[ -/]*([@-~])|\][^\u0007\u001b]*(?:\u0007|\u001b\\)|[ -/]*[0-Z\\-~])/g;
// The start of one of those, cut off at the end of a chunk.
const UNFINISHED = /^\u001b(?:\[[0-?]*[ -/]*|\][^\u0007\u001b]*\u001b?|[ -/]*)$/;

function styleAfter(style, params) {
  const codes = params === "" ? [0] : params.split(";").map((p) => (p === "" ? 0 : Number(p)));
  let next = { ...style };
  for (let i = 0; i < codes.length; i += 1) {
    const code = codes[i];
    if (code === 0) next = {};
    else if (code === 1) next.bold = true;
    else if (code === 2) next.dim = true;
    else if (code === 3) next.italic = true;
    else if (code === 4) next.underline = true;
    else if (code === 22) { delete next.bold; delete next.dim; }
    else if (code === 23) delete next.italic;
    else if (code === 24) delete next.underline;
    else if (code >= 30 && code <= 37) next.fg = code - 30;
    else if (code >= 90 && code <= 97) next.fg = code - 90 + 8;
    else if (code === 39) delete next.fg;
    else if (code >= 40 && code <= 47) next.bg = code - 40;
    else if (code >= 100 && code <= 107) next.bg = code - 100 + 8;
    else if (code === 49) delete next.bg;
    else if (code === 38 || code === 48) i += codes[i + 1] === 5 ? 2 : codes[i + 1] === 2 ? 4 : 1; // 256/true colour: skipped
  }
  return next;
}

function classesOf(style) {
  const names = [];
  if (style.fg !== undefined) names.push(`ansi-fg-${style.fg}`);
  if (style.bg !== undefined) names.push(`ansi-bg-${style.bg}`);
  for (const flag of ["bold", "dim", "italic", "underline"]) if (style[flag]) names.push(`ansi-${flag}`);
  return names.join(" ");
}

/** Appends output to `target` chunk by chunk; a sequence split across chunks waits for its end. `show`
 * maps the text between sequences (a job's output is shown as it is; its result `visible`, as `mam show`
 * prints it). */
export class AnsiRenderer {
  constructor(target, show = (text) => text) {
    this.target = target;
    this.show = show;
    this.reset();
  }

  reset() {
    this.style = {};
    this.pending = "";
    this.target.replaceChildren();
  }

  append(chunk) {
    let text = this.pending + chunk;
    this.pending = "";
    const cut = text.lastIndexOf(ESC);
    if (cut >= 0 && text.length - cut <= 256 && UNFINISHED.test(text.slice(cut))) {
      this.pending = text.slice(cut);  // an unfinished sequence at the end: kept for the next chunk
      text = text.slice(0, cut);
    }
    const nodes = [];
    let at = 0;
    SEQUENCE.lastIndex = 0;
    for (let match = SEQUENCE.exec(text); match; match = SEQUENCE.exec(text)) {
      this.#text(nodes, text.slice(at, match.index));
      if (match[2] === "m") this.style = styleAfter(this.style, match[1]);
      at = SEQUENCE.lastIndex;
    }
    this.#text(nodes, text.slice(at));
    this.target.append(...nodes);
  }

  #text(nodes, text) {
    const shown = this.show(text.replaceAll(ESC, ""));  // a lone ESC that starts no sequence: dropped
    if (!shown) return;
    const classes = classesOf(this.style);
    if (!classes) {
      nodes.push(document.createTextNode(shown));
      return;
    }
    const span = document.createElement("span");
    span.className = classes;
    span.textContent = shown;
    nodes.push(span);
  }
}
