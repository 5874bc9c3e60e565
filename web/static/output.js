// A job's live output: coloured (ansi.js), appended as it arrives, and following its tail unless the person
// scrolled up to read; then a "jump to end" control brings the tail back and follows again.

import { AnsiRenderer } from "./ansi.js";

const SLACK = 8;  // pixels from the bottom that still count as "at the end"

export class OutputPane {
  constructor(pre, jump) {
    this.pre = pre;
    this.jump = jump;
    this.renderer = new AnsiRenderer(pre);
    this.jobId = null;
    this.shown = "";
    this.following = true;
    pre.addEventListener("scroll", () => this.#scrolled());
    jump.addEventListener("click", () => {
      this.following = true;
      this.#toEnd();
    });
  }

  atEnd() {
    return this.pre.scrollTop + this.pre.clientHeight >= this.pre.scrollHeight - SLACK;
  }

  /** Show `text` for `jobId`: only what is new is appended, unless the job or the text's start changed. */
  show(jobId, text) {
    if (jobId !== this.jobId || !text.startsWith(this.shown)) {
      const sameJob = jobId === this.jobId;
      this.jobId = jobId;
      this.shown = "";
      this.renderer.reset();
      if (!sameJob) this.following = true;
    }
    if (text.length > this.shown.length) {
      this.renderer.append(text.slice(this.shown.length));
      this.shown = text;
    }
    if (this.following) this.#toEnd();
    this.jump.hidden = this.following || this.atEnd();
  }

  #toEnd() {
    this.pre.scrollTop = this.pre.scrollHeight;
    this.jump.hidden = true;
  }

  #scrolled() {
    this.following = this.atEnd();
    this.jump.hidden = this.following;
  }
}
