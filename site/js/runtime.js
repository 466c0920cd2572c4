/* The page's client for the Python workers (js/pyworker.js).
 *
 *   const rt = getRuntime();                     // the worker that runs learner code
 *   const judge = getJudge();                    // a second worker that never does
 *   rt.onProgress(({stage, message}) => ...);   // runtime | numpy | nlpcore | ready | error
 *   await rt.ready;                              // rejects with a stated reason on boot failure
 *   const out = await rt.call("lab.prepare", {n: 64, d: 32}, {timeoutMs: 60000});
 *
 * call() sends {id, name, payload}; the worker replies {id, result} or {id, error}. A call that
 * outlives its time limit terminates the worker (Python cannot be interrupted otherwise),
 * starts a fresh one, and rejects with a "time limit" error. Errors are Error objects whose
 * message is the Python exception's last line; `error.traceback` keeps the full text.
 * Every progress event also sets <html data-runtime="<stage>"> (tests wait on "ready").
 *
 * Isolation: a result of the learner worker that carries a non-empty `restored` list (what the
 * Python side had to undo after the learner's code, nlpcore.lab.session.isolated) means the
 * submission reached into the interpreter: the worker is replaced by a fresh one after the
 * answer is delivered, so nothing it did can reach a later grade or page action. Honest code
 * restores nothing and keeps the warm worker. <html data-runtime-starts> counts the workers
 * started.
 *
 * Judging: a grade's expected values and verdicts are computed in the judge worker (role
 * "judge"; js/check-runner.js sends it the learner worker's collected data), which never runs
 * learner code and answers only the judge's calls; its progress is on <html data-judge="<stage>">.
 * A page that grades says so with expectJudge(); the judge then boots as BOOT ORDER says.
 *
 * Pyodide's WebAssembly (11 MB) is compiled once per page, here, and the compiled module is
 * posted to every worker started (js/pyworker.js instantiates it, or fetches its own when the
 * page could not compile it): a second worker, or a fresh one after a time limit, skips the
 * download and the compile, and reuses the code V8 compiled lazily for the first.
 */

const DEFAULT_TIMEOUT_MS = 120000;

// BOOT ORDER. The page is "ready" when the learner's worker is (and warmed up); a grade needs the
// judge too. The judge starts when the learner's worker reaches JUDGE_STARTS_AT -- "runtime":
// at once, so the two boot side by side (both lighter than one boot was: the wasm compiled once
// here, precompiled bytecode, no micropip) and the judge is up about when the page is ready. A
// grade asked for earlier waits for it (a call's time limit starts once its worker is ready).
// Later starts ("numpy", "nlpcore") left the first grade waiting for the judge. Measured with
// bench/exercise_page.py: bench/results/exercise_page_boot.json (before/after) and
// exercise_page_boot_orders.json (the orders compared in one run).
const JUDGE_STARTS_AT = "runtime";
const STAGES = ["runtime", "numpy", "nlpcore", "ready", "error"];

let compiled = null;

/* Pyodide's compiled WebAssembly.Module, or null when this page could not compile it. */
function pyodideWasm() {
  if (!compiled) {
    const url = new URL("../vendor/pyodide/pyodide.asm.wasm", import.meta.url);
    compiled = WebAssembly.compileStreaming(fetch(url))
      .catch(() => fetch(url).then((response) => response.arrayBuffer()).then((b) => WebAssembly.compile(b)))
      .catch(() => null);  // each worker then fetches and compiles its own (and says so if it cannot)
  }
  return compiled;
}

class Runtime {
  constructor(workerUrl, role = "learner") {
    this.workerUrl = workerUrl;
    this.role = role;
    this.listeners = new Set();
    this.lastProgress = null;
    this.nextId = 1;
    this.pending = new Map();  // id -> {resolve, reject, timer}
    this.start();
  }

  start() {
    this.worker = new Worker(this.workerUrl);
    this.starts = (this.starts || 0) + 1;
    if (typeof document !== "undefined" && this.role === "learner") {
      document.documentElement.dataset.runtimeStarts = String(this.starts);
    }
    this.info = null;
    let settle;
    this.ready = new Promise((resolve, reject) => { settle = {resolve, reject}; });
    this.ready.catch(() => {});  // callers see the rejection through their own awaits
    if (this.starts > 1) this.emit({stage: "runtime", message: "starting a fresh Python worker"});
    const worker = this.worker;
    pyodideWasm().then((module) => {
      try {
        worker.postMessage({type: "wasm", module});
      } catch (_error) {  // a browser that cannot post a WebAssembly.Module
        worker.postMessage({type: "wasm", module: null});
      }
    });
    worker.onmessage = (event) => this.receive(event.data, settle);
    worker.onerror = (event) => {
      event.preventDefault();
      const reason = `the Python worker failed: ${event.message || "could not load js/pyworker.js"}`;
      this.emit({stage: "error", message: reason});
      settle.reject(new Error(reason));
      this.rejectAll(reason);
    };
  }

  receive(data, settle) {
    if (data.type === "progress") {
      this.emit({stage: data.stage, message: data.message});
    } else if (data.type === "ready") {
      this.info = data.info;
      settle.resolve(data.info);
    } else if (data.type === "boot-error") {
      settle.reject(new Error(`Python could not start: ${data.error}`));
    } else if (this.pending.has(data.id)) {
      const {resolve, reject, timer} = this.pending.get(data.id);
      clearTimeout(timer);
      this.pending.delete(data.id);
      if ("error" in data) {
        const error = new Error(data.error);
        error.traceback = data.traceback || data.error;
        reject(error);
      } else {
        resolve(data.result);
      }
    }
  }

  emit(event) {
    this.lastProgress = event;
    // A page-wide hook for tests and styles: <html data-runtime="runtime|numpy|nlpcore|ready|error">
    // (the judge worker's on data-judge).
    if (typeof document !== "undefined") {
      document.documentElement.dataset[this.role === "learner" ? "runtime" : "judge"] = event.stage;
    }
    for (const listener of this.listeners) listener(event);
  }

  /* Calls cb with every progress event (and at once with the latest); returns an unsubscribe. */
  onProgress(cb) {
    this.listeners.add(cb);
    if (this.lastProgress) cb(this.lastProgress);
    return () => this.listeners.delete(cb);
  }

  async call(name, payload = {}, {timeoutMs = DEFAULT_TIMEOUT_MS} = {}) {
    await this.ready;
    const worker = this.worker;
    const id = this.nextId++;
    const result = new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${name} exceeded its time limit of ${(timeoutMs / 1000).toFixed(1)} s; ` +
                         "Python was restarted"));
        if (this.worker === worker) this.restart("a call exceeded its time limit");
      }, timeoutMs);
      this.pending.set(id, {resolve, reject, timer});
      worker.postMessage({id, name, payload});
    });
    if (this.role !== "learner") return result;
    const out = await result;
    if (out && Array.isArray(out.restored) && out.restored.length && this.worker === worker) {
      this.restart(`the submission changed the Python interpreter (${out.restored.slice(0, 3).join(", ")})`);
    }
    return out;
  }

  rejectAll(reason) {
    for (const {reject, timer} of this.pending.values()) {
      clearTimeout(timer);
      reject(new Error(reason));
    }
    this.pending.clear();
  }

  /* Terminates the worker (rejecting calls in flight) and boots a fresh one. */
  restart(reason = "the runtime was restarted") {
    this.worker.terminate();
    this.rejectAll(`Python was restarted: ${reason}`);
    this.start();
    return this.ready;
  }
}

let shared = null;
let judge = null;
let judgeExpected = false;
let judgeExercise = null;

/* Boots the judge once this page grades and the learner's worker reached JUDGE_STARTS_AT. */
function startJudgeWhenDue() {
  const stage = shared && shared.lastProgress && shared.lastProgress.stage;
  if (judgeExpected && STAGES.indexOf(stage) >= STAGES.indexOf(JUDGE_STARTS_AT)) getJudge();
}

/* The page's runtime for learner code and page actions (the worker boots at once). */
export function getRuntime() {
  if (!shared) {
    shared = new Runtime(new URL("./pyworker.js", import.meta.url));
    shared.onProgress(startJudgeWhenDue);
  }
  return shared;
}

/* The judge: a second worker that never runs learner code (boots at once when asked for). It
 * is ready with the graders of the page's exercise imported (expectJudge's `exercise`), or of
 * every exercise when the page named none. */
export function getJudge() {
  if (!judge) {
    const url = new URL("./pyworker.js?role=judge", import.meta.url);
    if (judgeExercise) url.searchParams.set("exercise", judgeExercise);
    judge = new Runtime(url, "judge");
  }
  return judge;
}

/* This page grades (`exercise`: the id of the exercise it grades): the judge boots beside the
 * learner's worker, as BOOT ORDER says. */
export function expectJudge(exercise = null) {
  judgeExpected = true;
  if (!judge && typeof exercise === "string" && exercise) judgeExercise = exercise;
  getRuntime();
  startJudgeWhenDue();
}
