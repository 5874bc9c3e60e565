// Work started by stream events runs once per burst: a second request while one is waiting joins it,
// one arriving while it runs runs it again after.
const runs = new Map();
export function soon(name, ms, work) {
  const run = runs.get(name) || { timer: null, busy: false, again: false };
  runs.set(name, run);
  if (run.busy) {
    run.again = true;
    return;
  }
  if (run.timer) return;
  run.timer = setTimeout(async () => {
    run.timer = null;
    run.busy = true;
    try {
      await work();
    } finally {
      run.busy = false;
      if (run.again) {
        run.again = false;
        soon(name, ms, work);
      }
    }
  }, ms);
}
