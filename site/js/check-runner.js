/* The exercise page's check runner: one grade of the learner's code, in the Pyodide worker.
 *
 * grade(runtime, {exercise, step, code}) runs the code in the learner worker
 * (runtime.call("exercises.collect", ...), with the page's time limit: an endless loop makes
 * runtime.js terminate the worker and start a fresh one, and the call rejects with a "time
 * limit" error) and has the judge worker (runtime.js getJudge(), which never runs learner code)
 * compute the grade from the collected data ("exercises.judge").
 *
 * Checks that run partly in the page (e.g. on the GPU): grade returns such a check with status
 * "pending", its `runner` name and a `job` (plain data, e.g. a dispatch spec). The job goes to
 * the runner registered under that name -- registerCheckRunner(name, async (job) => outputs) --
 * and the outputs go back to the judge ("exercises.conclude"), which computes their verdicts and
 * the grade's: the page only displays it. A runner that finds the code itself unusable (a
 * shader that does not compile) throws an Error with `failsAll = true`: the judge then fails
 * every graded check as "error" with that message, the checks passed without compiling
 * included. A "webgpu" runner is built in: it runs a dispatch spec with
 * js/gpu.js and returns {name: bytes} of the output bindings; an exercise's page module
 * (js/exercises/<id>.js) may register its own in its place.
 */

import {expectJudge, getJudge} from "./runtime.js";

export const TIME_LIMIT_MS = 10000;
// runtime.js boots the judge beside the learner's worker (its BOOT ORDER), with the graders of
// the page's exercise (exercise.html?id=<id>) imported.
expectJudge(new URLSearchParams(globalThis.location ? globalThis.location.search : "").get("id"));
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

/* The outputs of a pending check, or why the page could not run it. */
async function runJob(c) {
  const run = runners.get(c.runner);
  if (!run) return {error: `this page has no runner for "${c.runner}" checks`, fails_all: false};
  try {
    return {outputs: await run(c.job)};
  } catch (error) {
    return {error: error.message, fails_all: Boolean(error.failsAll)};
  }
}

/* One grade: {passed, checks, stdout, stderr, traceback, record, report, elapsed_ms, seed, ...},
 * and `page_ms`: the time its pending checks ran in this page (e.g. compiling and running a
 * shader with WebGPU), which is neither Python's time nor a wait for a worker.
 * The learner worker runs the code and collects its outputs as data; the judge worker computes
 * the verdicts; pending checks run here and go back to the judge, which applies every rule.
 * `only`: check ids to run alone, in both workers (the grade then holds just those and never
 * passes the step); `seed`: the inputs' seed (a rerun repeats its grade's), fresh when null. */
export async function grade(runtime, {exercise, step, code, only = null, seed = null}) {
  const judge = getJudge();
  const {phase} = await runtime.call("exercises.collect", {exercise, step, code, only, seed}, {timeoutMs: TIME_LIMIT_MS});
  const out = await judge.call("exercises.judge", {exercise, step, phase}, {timeoutMs: TIME_LIMIT_MS});
  const pending = out.checks.filter((c) => c.status === "pending");
  if (!pending.length) return {...out, page_ms: 0};
  const ran = {};
  const started = performance.now();
  for (const c of pending) ran[c.id] = await runJob(c);
  const pageMs = performance.now() - started;
  const done = await judge.call("exercises.conclude", {exercise, step, code, grade: out, ran}, {timeoutMs: TIME_LIMIT_MS});
  return {...done, page_ms: pageMs};
}

/* The page's warm-up before it says "ready": one collect in the learner's worker (the graders
 * imported, the sandbox's snapshot taken) of the step's reference solution where that is
 * harmless -- a Python step that is not a Predict step (a Predict step's solution is its answer,
 * and what a collect returns passes through the page) -- else of its starter; then, without
 * waiting for it, the judge judges what came back. A solution runs every check's code paths
 * (NumPy's WebAssembly compiled on first use, shared by both workers), so the first grade the
 * learner asks for costs what later ones do. Resolves when the learner's part is done. */
export async function warmUp(runtime, exercise, step) {
  const solved = (step.language || "python") === "python" && step.kind !== "Predict" && step.solution;
  const code = solved ? step.solution : step.starter || "";
  const {phase} = await runtime.call("exercises.collect", {exercise, step: step.id, code}, {timeoutMs: 60000});
  getJudge().call("exercises.judge", {exercise, step: step.id, phase}, {timeoutMs: 60000}).catch(() => {});
}

/* True for the error a run that overran the time limit rejects with. */
export const overran = (error) => /time limit/.test(error.message);
