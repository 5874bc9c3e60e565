// What the charts show: GET /api/stats (the server's counts over the registry), or, from a server without
// that route, the same shape worked out from the jobs the page's stream holds (the newest 500).

/** The windows a person picks from: how far back, in buckets of how many seconds, and what a bucket is. */
export const WINDOWS = {
  "15m": { minutes: 15, bucket: 15, per: "15 s" },
  "1h": { minutes: 60, bucket: 60, per: "minute" },
  "6h": { minutes: 360, bucket: 300, per: "5 min" },
  "24h": { minutes: 1440, bucket: 1200, per: "20 min" },
  "7d": { minutes: 10080, bucket: 3600, per: "hour" },
};
export const DEFAULT_WINDOW = "1h";
const TERMINAL = ["succeeded", "failed", "cancelled", "timed_out", "lost"];

export async function fetchStats(jobs, span = WINDOWS[DEFAULT_WINDOW]) {
  try {
    const response = await fetch(`/api/stats?minutes=${span.minutes}&bucket=${span.bucket}`);
    if (response.ok) return { ...(await response.json()), source: "server" };
    if (response.status !== 404) return { error: `stats: HTTP ${response.status}` };
  } catch (error) {
    return { error: `stats: ${error}` };
  }
  return { ...statsFrom(jobs, Date.now(), span), source: "page" };
}

const at = (iso) => (iso ? Date.parse(iso) : NaN);

/** {bucket_s, from, to, finished, queue, cost} from job rows, as /api/stats answers. */
export function statsFrom(jobs, now, span = WINDOWS[DEFAULT_WINDOW]) {
  const step = span.bucket * 1000;
  const to = Math.ceil(now / step) * step;
  const from = to - span.minutes * 60 * 1000;
  const finished = [];
  const queue = [];
  const cost = [];
  for (let t = from; t < to; t += step) {
    finished.push({ t: new Date(t).toISOString() });
    queue.push({ t: new Date(t).toISOString(), queued: 0, running: 0 });
    cost.push({ t: new Date(t).toISOString() });
  }
  const slot = (ms) => Math.floor((ms - from) / step);
  for (const job of jobs) {
    const done = at(job.finished_at);
    if (TERMINAL.includes(job.status) && done >= from && done < to) {
      const i = slot(done);
      finished[i][job.status] = (finished[i][job.status] || 0) + 1;
      const usd = job.usage ? job.usage.cost_usd : job.cost_usd;
      if (typeof usd === "number") cost[i][job.agent] = (cost[i][job.agent] || 0) + usd;
    }
    const submitted = at(job.submitted_at);
    const started = at(job.started_at || job.claimed_at);
    const ended = Number.isNaN(done) ? Infinity : done;
    queue.forEach((point, i) => {
      const end = from + (i + 1) * step;
      if (submitted <= end && !(started <= end) && !(ended <= end)) point.queued += 1;
      else if (started <= end && !(ended <= end)) point.running += 1;
    });
  }
  return { bucket_s: span.bucket, from: new Date(from).toISOString(), to: new Date(to).toISOString(), finished, queue, cost };
}
