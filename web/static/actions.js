// The writes a person makes from the page, each a JSON POST answered with the projector's verdict (or the
// server's refusal): submit, retry, cancel (with its reason, optionally the whole tree) and answer.

async function post(path, body) {
  try {
    const response = await fetch(path, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    let answer = {};
    try {
      answer = await response.json();
    } catch (error) {
      answer = { error: `HTTP ${response.status}` };
    }
    return response.ok ? { ok: true, ...answer } : { ok: false, error: answer.error || `HTTP ${response.status}` };
  } catch (error) {
    return { ok: false, error: String(error) };
  }
}

const job = (jobId, action) => `/api/jobs/${encodeURIComponent(jobId)}/${action}`;

export async function cancelJob(jobId, { reason, tree }) {
  const answer = await post(job(jobId, "cancel"), { reason: reason || "cancelled from the dashboard", tree: Boolean(tree) });
  const what = tree ? "cancel of the tree" : "cancel";
  if (!answer.ok) return `${what} refused: ${answer.error}`;
  // As mam cancel says it: a running job stops once its runner has stopped the agent.
  return answer.status === "cancelled"
    ? `cancelled: ${answer.job_id}${tree ? " and the jobs under it" : ""}`
    : `${what} requested: ${answer.job_id} (was ${answer.status}; it ends once its runner stops it)`;
}

export async function retryJob(jobId) {
  const answer = await post(job(jobId, "retry"), {});
  return answer.ok ? `retry recorded: ${answer.job_id} is ${answer.status}` : `retry refused: ${answer.error}`;
}

export async function answerJob(jobId, text, questionId) {
  const answer = await post(job(jobId, "answer"), { answer: text, question_id: questionId });
  return answer.ok ? `answer recorded: ${answer.job_id} is ${answer.status}` : `answer refused: ${answer.error}`;
}

/** "k=v, k2=v2" as {k: "v", k2: "v2"}; a part without "=" is refused naming it. */
export function parseLabels(text) {
  const labels = {};
  for (const part of text.split(",").map((p) => p.trim()).filter(Boolean)) {
    const at = part.indexOf("=");
    if (at <= 0) throw new Error(`label ${JSON.stringify(part)} is not key=value`);
    labels[part.slice(0, at).trim()] = part.slice(at + 1).trim();
  }
  return labels;
}

/** POST /api/jobs: {ok, job_id, status} or {ok: false, error}. */
export async function submitJob({ agent, prompt, labels }) {
  return post("/api/jobs", { agent, prompt, labels });
}
