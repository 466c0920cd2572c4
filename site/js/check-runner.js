/* The exercise page's check runner: one grade of the learner's code, in the Pyodide worker.
 *
 * grade(runtime, {exercise, step, code}) calls runtime.call("exercises.grade", ...) with the
 * page's time limit (an endless loop makes runtime.js terminate the worker and start a fresh
 * one; the call then rejects with a "time limit" error) and returns the grade.
 *
 * Checks that run partly in the page (e.g. on the GPU): grade returns such a check with status
 * "pending", its `runner` name and a `job` (plain data, e.g. a dispatch spec). The job goes to
 * the runner registered under that name -- registerCheckRunner(name, async (job) => outputs) --
 * and the outputs go back through "exercises.verify" for the verdict. A runner that finds the
 * code itself unusable (a shader that does not compile) throws an Error with `failsAll = true`:
 * every graded check of the run then fails as "error" with that message, the checks Python
 * passed without compiling included. A "webgpu" runner is built in: it runs a dispatch spec with
 * js/gpu.js and returns {name: bytes} of the output bindings; an exercise's page module
 * (js/exercises/<id>.js) may register its own in its place.
 */

export const TIME_LIMIT_MS = 10000;
const runners = new Map();

/* Registers `run(job) -> Promise<outputs>` for checks whose runner is `name`. */
export function registerCheckRunner(name, run) {
  if (typeof name !== "string" || !name || typeof run !== "function") {
    throw new TypeError("registerCheckRunner(name: string, run: async (job) => outputs)");
  }
  runners.set(name, run);
}

let gpuPromise = null;
registerCheckRunner("webgpu", async (job) => {
  const gpuModule = await import("./gpu.js");
  if (!gpuPromise) gpuPromise = gpuModule.openGpu();
  let gpu;
  try {
    gpu = await gpuPromise;
  } catch (error) {
    gpuPromise = null;
    throw error;
  }
  const {outputs} = await gpuModule.runSpec(gpu, job);
  return outputs;
});

async function finishPending(runtime, out, {exercise, step, code}) {
  let unusable = null;  // a runner's failsAll error: the code cannot be used by any check
  for (let i = 0; i < out.checks.length; i += 1) {
    const c = out.checks[i];
    if (c.status !== "pending") continue;
    const run = runners.get(c.runner);
    if (!run) {
      out.checks[i] = {...c, status: "error", job: undefined,
                       message: `this page has no runner for "${c.runner}" checks`};
      continue;
    }
    try {
      const outputs = await run(c.job);
      out.checks[i] = await runtime.call("exercises.verify", {
        exercise, step, check: c.id, code, job: c.job, outputs,
      }, {timeoutMs: TIME_LIMIT_MS});
    } catch (error) {
      out.checks[i] = {...c, status: "error", job: undefined,
                       message: `could not run on ${c.runner}: ${error.message}`};
      if (error.failsAll && !unusable) unusable = error.message;
    }
  }
  if (unusable) {
    out.checks = out.checks.map((c) => (c.status === "local" ? c : {
      id: c.id, title: c.title, runner: c.runner, status: "error",
      message: c.status === "error" ? c.message : `not graded: ${unusable}`}));
  }
  const graded = out.checks.filter((c) => c.status !== "local");
  out.passed = graded.length > 0 && graded.every((c) => c.status === "pass");
  return out;
}

/* One grade: {passed, checks, stdout, stderr, traceback, record, report, elapsed_ms, ...}. */
export async function grade(runtime, {exercise, step, code}) {
  const out = await runtime.call("exercises.grade", {exercise, step, code}, {timeoutMs: TIME_LIMIT_MS});
  if (out.checks.some((c) => c.status === "pending")) return finishPending(runtime, out, {exercise, step, code});
  return out;
}

/* True for the error a run that overran the time limit rejects with. */
export const overran = (error) => /time limit/.test(error.message);
