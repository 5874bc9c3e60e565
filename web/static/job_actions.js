// What a person does to the open job from the page: cancel (asked first, in the page), retry, answer its
// question, merge or discard a worktree job's branch (its diff shown first), and submit a new job. `state`,
// `draw` and `open` are app.js's.

import { answerJob, cancelJob, parseLabels, retryJob, submitJob } from "./actions.js";
import { visible } from "./dom.js";
import { worktreeJob } from "./view.js";

const $ = (selector) => document.querySelector(selector);

/** The job actions, on app.js's `state`; `draw` after each change, `open(jobId)` for a job just submitted. */
export function jobActions(state, draw, open) {
  // A finished worktree job's diff: asked for once per job shown (and again after a merge or discard).
  async function fetchDiff(jobId) {
    state.diff = { job_id: jobId, loading: true };
    try {
      const response = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/diff`);
      const answer = await response.json();
      if (state.jobId !== jobId) return;
      state.diff = response.ok ? answer : { job_id: jobId, error: answer.error };
    } catch (error) {
      state.diff = { job_id: jobId, error: `cannot load the diff: ${error}` };
    }
    draw();
  }

  function diffWanted() {
    const record = state.detail && state.detail.record;
    if (worktreeJob(record) && !(state.diff && state.diff.job_id === record.job_id)) fetchDiff(record.job_id);
  }

  // Merge (or squash-merge) into the workspace checkout's current branch, or discard: asked first.
  async function land(action, squash) {
    const jobId = state.jobId;
    const what = action === "discard"
      ? `Discard job ${jobId}: delete its branch and worktree? Its work is lost.`
      : `${squash ? "Squash-merge" : "Merge"} job ${jobId} into the workspace checkout's current branch?`;
    if (!confirm(what)) return;
    state.verdict = `${action === "discard" ? "discarding" : "merging"} ${jobId}…`;
    draw();
    try {
      const response = await fetch(`/api/jobs/${encodeURIComponent(jobId)}/${action}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ squash: Boolean(squash) }),
      });
      const answer = await response.json();
      state.verdict = response.ok ? answer.done : `${action} refused: ${answer.error}`;
    } catch (error) {
      state.verdict = `${action} failed: ${error}`;
    }
    if (state.jobId === jobId) fetchDiff(jobId);
    draw();
  }


  // Cancel asks first, in the page: the reason to record and whether the jobs delegated under it go too.
  function askCancel(tree) {
    const form = $("#cancel-form");
    form.hidden = false;
    form.elements.tree.checked = tree;
    $("#cancel-what").textContent = `Cancel ${state.jobId}? Its runner stops it; this cannot be undone.`;
    form.elements.reason.focus();
  }

  async function cancel() {
    const jobId = state.jobId;
    const form = $("#cancel-form");
    const tree = form.elements.tree.checked;
    const reason = form.elements.reason.value.trim();
    form.hidden = true;
    form.elements.reason.value = "";
    state.verdict = `asking to cancel ${jobId}${tree ? " and its tree" : ""}…`;
    draw();
    state.verdict = await cancelJob(jobId, { reason, tree });
    draw();
  }

  async function retry() {
    const jobId = state.jobId;
    state.verdict = `asking to retry ${jobId}…`;
    draw();
    state.verdict = await retryJob(jobId);
    draw();
  }

  async function answer(text) {
    const jobId = state.jobId;
    const record = state.detail && state.detail.record;
    state.verdict = `answering ${jobId}…`;
    draw();
    state.verdict = await answerJob(jobId, text, record ? record.question_id : null);
    draw();
  }

  async function submit(form) {
    const verdict = $("#submit-verdict");
    let labels;
    try {
      labels = parseLabels(form.elements.labels.value);
    } catch (error) {
      verdict.textContent = error.message;
      return;
    }
    const agent = form.elements.agent.value.trim();
    verdict.textContent = `submitting for ${agent}…`;
    const answer = await submitJob({ agent, prompt: form.elements.prompt.value, labels });
    if (!answer.ok) {
      verdict.textContent = visible(`submit refused: ${answer.error}`);
      return;
    }
    verdict.textContent = `submitted ${answer.job_id} (${answer.status})`;
    form.elements.prompt.value = "";
    open(answer.job_id);
  }

  return { answer, askCancel, cancel, diffWanted, fetchDiff, land, retry, submit };
}
