// Saved learner progress, kept in the browser's localStorage.
//
// One JSON document under STORAGE_KEY (shared contract, see DESIGN common note #5):
//   {"version": 1,
//    "exercises": {<exercise id>: {<step>: {"done": true, "at": ISO, ...extra}}},
//    "lab":       {<step id>: {"done": true, "answer": ..., "at": ISO, ...extra}}}
//
// A step's record may exist before it is done (noteStep), and keeps what it learned when it is
// done (markStep merges): "solution_viewed": true once the learner loaded the solution (the
// pages then say "solution viewed", apart from "solved"); Predict steps keep "first": the first
// prediction {answer, checks: {check id: status}, at} and "revealed": true once the answer
// was shown.
//
// Corrupt or foreign data never breaks a page: loadProgress() resets it to an empty
// document and returns a notice string that the page shows to the learner. When storage
// is unavailable (private mode, blocked cookies) progress lives in memory for this page
// and the notice says so.

export const STORAGE_KEY = "fa-lab-progress-v1";
export const VERSION = 1;
export const AREAS = ["exercises", "lab"];

let memoryFallback = null; // used only when localStorage cannot be read or written

function emptyProgress() {
  return { version: VERSION, exercises: {}, lab: {} };
}

function storage() {
  try {
    const s = window.localStorage;
    const probe = STORAGE_KEY + ":probe";
    s.setItem(probe, "1");
    s.removeItem(probe);
    return s;
  } catch (err) {
    return null;
  }
}

function isPlainObject(x) {
  return x !== null && typeof x === "object" && !Array.isArray(x);
}

// Returns null when `doc` is a well-formed progress document, else a reason string.
function problemWith(doc) {
  if (!isPlainObject(doc)) return "it is not a JSON object";
  if (doc.version !== VERSION) return `its version is ${JSON.stringify(doc.version)}, expected ${VERSION}`;
  for (const area of AREAS) {
    if (!isPlainObject(doc[area])) return `"${area}" is not an object`;
  }
  for (const [id, steps] of Object.entries(doc.exercises)) {
    if (!isPlainObject(steps)) return `exercise "${id}" is not an object`;
    for (const [step, rec] of Object.entries(steps)) {
      if (!isPlainObject(rec)) return `exercise "${id}" step "${step}" is not an object`;
    }
  }
  for (const [step, rec] of Object.entries(doc.lab)) {
    if (!isPlainObject(rec)) return `lab step "${step}" is not an object`;
  }
  return null;
}

function write(doc) {
  const s = storage();
  if (!s) {
    memoryFallback = doc;
    return false;
  }
  s.setItem(STORAGE_KEY, JSON.stringify(doc));
  return true;
}

// -> {progress, notice}; notice is null, or a sentence for the learner saying what happened.
export function loadProgress() {
  const s = storage();
  if (!s) {
    if (!memoryFallback) memoryFallback = emptyProgress();
    return {
      progress: memoryFallback,
      notice: "Browser storage is unavailable, so progress is kept only until this page closes.",
    };
  }
  const raw = s.getItem(STORAGE_KEY);
  if (raw === null) return { progress: emptyProgress(), notice: null };
  let doc;
  let reason;
  try {
    doc = JSON.parse(raw);
    reason = problemWith(doc);
  } catch (err) {
    reason = "it is not valid JSON";
  }
  if (reason) {
    const fresh = emptyProgress();
    write(fresh);
    return {
      progress: fresh,
      notice: `Saved progress could not be read (${reason}), so it was reset to empty.`,
    };
  }
  return { progress: doc, notice: null };
}

function checkArea(area) {
  if (!AREAS.includes(area)) {
    throw new TypeError(`area must be one of ${AREAS.join(", ")}; got ${JSON.stringify(area)}`);
  }
}

function checkKey(name, value) {
  if (typeof value !== "string" || value === "") {
    throw new TypeError(`${name} must be a non-empty string; got ${JSON.stringify(value)}`);
  }
}

// Records one finished step and returns the saved document.
//   markStep("exercises", "online-softmax", "predict")
//   markStep("lab", "compare", null, {answer: 3})
// `extra` (a plain object) is merged into the record, e.g. {answer: ...}.
export function markStep(area, id, step, extra) {
  checkArea(area);
  checkKey("id", id);
  if (area === "exercises") checkKey("step", step);
  if (extra !== undefined && extra !== null && !isPlainObject(extra)) {
    throw new TypeError(`extra must be a plain object or null; got ${JSON.stringify(extra)}`);
  }
  return update(area, id, step, Object.assign({}, extra || {}, { done: true, at: new Date().toISOString() }));
}

// Merges `fields` into one step's record without marking it done, e.g.
//   noteStep("exercises", "online-softmax", "predict", {solution_viewed: true})
export function noteStep(area, id, step, fields) {
  checkArea(area);
  checkKey("id", id);
  if (area === "exercises") checkKey("step", step);
  if (!isPlainObject(fields)) {
    throw new TypeError(`fields must be a plain object; got ${JSON.stringify(fields)}`);
  }
  return update(area, id, step, fields);
}

function update(area, id, step, fields) {
  const { progress } = loadProgress();
  if (area === "lab") {
    progress.lab[id] = Object.assign({}, progress.lab[id] || {}, fields);
  } else {
    if (!isPlainObject(progress.exercises[id])) progress.exercises[id] = {};
    progress.exercises[id][step] = Object.assign({}, progress.exercises[id][step] || {}, fields);
  }
  write(progress);
  notify(progress);
  return progress;
}

// One exercise step's record ({} when there is none).
export function stepRecord(id, step) {
  const { progress } = loadProgress();
  const steps = progress.exercises[id] || {};
  return isPlainObject(steps[step]) ? steps[step] : {};
}

export function isDone(area, id, step) {
  checkArea(area);
  const { progress } = loadProgress();
  if (area === "lab") return Boolean(progress.lab[id] && progress.lab[id].done);
  const steps = progress.exercises[id];
  return Boolean(steps && steps[step] && steps[step].done);
}

// Steps marked done for one exercise (array of step names, in insertion order).
export function doneSteps(id) {
  const { progress } = loadProgress();
  const steps = progress.exercises[id] || {};
  return Object.keys(steps).filter((k) => steps[k] && steps[k].done);
}

// Steps of one exercise done after the learner had loaded the solution.
export function solutionViewedSteps(id) {
  const { progress } = loadProgress();
  const steps = progress.exercises[id] || {};
  return Object.keys(steps).filter((k) => steps[k] && steps[k].done && steps[k].solution_viewed);
}

// Replaces the whole document with `doc` (a progress document, e.g. from an imported file);
// throws TypeError naming what is wrong when it is not one.
export function saveProgressDocument(doc) {
  const reason = problemWith(doc);
  if (reason) throw new TypeError(`not a progress document: ${reason}`);
  write(doc);
  notify(doc);
  return doc;
}

// Removes all saved progress (the index page offers this as a button).
export function resetProgress() {
  const fresh = emptyProgress();
  write(fresh);
  notify(fresh);
  return fresh;
}

// Listeners are called with the new document after markStep/resetProgress in this page,
// and after another tab changes the stored value.
const listeners = new Set();
function notify(doc) {
  for (const cb of listeners) cb(doc);
}
export function onProgressChange(cb) {
  listeners.add(cb);
  return () => listeners.delete(cb);
}
if (typeof window !== "undefined") {
  window.addEventListener("storage", (ev) => {
    if (ev.key === STORAGE_KEY) notify(loadProgress().progress);
  });
}
