/* All of a learner's work as one file: progress (js/progress.js), drafts (js/exercise-drafts.js)
 * and the guided lab's typed answers, form and submitted predictions (js/lab-memory.js).
 *
 *   exportWork() -> {format: "fa-lab-work", version: 1, exported_at, progress, drafts, kept_drafts,
 *                    guided}
 *   planImport(text) -> {doc, summary}   parses and checks a file; throws Error saying what is wrong
 *   applyImport(doc) -> {drafts, keptAside}
 *   mountWorkFile({before, after})  wires the page's buttons (#export-work, #import-work-button,
 *                  #import-work, the #confirm-import question, #work-status); `before()` runs
 *                  before an export or import (save what is pending), `after()` after an import
 *
 * Importing merges and loses nothing: a step's progress record is merged field by field (a step
 * done in either copy stays done; the imported record's fields win otherwise, the current
 * `first` prediction is kept); an imported draft replaces the current one, and a current draft
 * that differs is set aside as a kept draft ("Restore my draft" brings it back). The guided lab's
 * memory is merged the same way: an answer typed here is kept, the file's fills what is missing,
 * and submitted predictions are the union of both.
 */
import {loadProgress, saveProgressDocument} from "./progress.js";
import {DRAFTS_KEY, KEPT_KEY, readStore} from "./exercise-drafts.js";
import {el} from "./dom.js";
import {STORAGE_KEY as GUIDED_KEY} from "./lab-memory.js";

export const FORMAT = "fa-lab-work";
export const VERSION = 1;

const isObject = (x) => x !== null && typeof x === "object" && !Array.isArray(x);

/* "1 draft", "2 drafts": a count with its noun. */
const count = (n, noun) => `${n} ${noun}${n === 1 ? "" : "s"}`;

export function exportWork() {
  return {format: FORMAT, version: VERSION, exported_at: new Date().toISOString(),
          progress: loadProgress().progress, drafts: readStore(DRAFTS_KEY), kept_drafts: readStore(KEPT_KEY),
          guided: readStore(GUIDED_KEY)};
}

/* The guided lab's memory after an import: this browser's answers and form win, the file's fill
 * what is missing, predictions and reveals are the union (nothing typed here is lost). */
function mergeGuided(current, incoming) {
  if (!isObject(incoming)) return current;
  const list = (doc, name) => (isObject(doc) && Array.isArray(doc[name]) ? doc[name] : []);
  const union = (name) => [...new Set([...list(current, name), ...list(incoming, name)])];
  const drafts = {...(isObject(incoming.drafts) ? incoming.drafts : {}),
                  ...(isObject(current.drafts) ? current.drafts : {})};
  return {...incoming, ...current, form: current.form || incoming.form || null, drafts,
          predicted: union("predicted"), revealed: union("revealed")};
}

export function workFileName(date = new Date()) {
  return `flashattention-lab-work-${date.toISOString().slice(0, 10)}.json`;
}

/* Parses and checks an exported file; returns {doc, summary} or throws Error saying what is wrong. */
export function planImport(text) {
  let doc;
  try {
    doc = JSON.parse(text);
  } catch (error) {
    throw new Error(`the file is not JSON (${error.message})`);
  }
  if (!isObject(doc) || doc.format !== FORMAT) {
    throw new Error(`the file is not a lab work file (expected "format": "${FORMAT}")`);
  }
  if (doc.version !== VERSION) throw new Error(`the file's version is ${JSON.stringify(doc.version)}, expected ${VERSION}`);
  if (!isObject(doc.drafts) || Object.values(doc.drafts).some((v) => typeof v !== "string")) {
    throw new Error('"drafts" must map "<exercise>/<step>" to code (text)');
  }
  if (doc.kept_drafts !== undefined && !isObject(doc.kept_drafts)) throw new Error('"kept_drafts" must be an object');
  if (doc.guided !== undefined && !isObject(doc.guided)) throw new Error('"guided" must be an object');
  const steps = isObject(doc.progress) && isObject(doc.progress.exercises)
    ? Object.values(doc.progress.exercises).reduce((n, s) => n + (isObject(s) ? Object.keys(s).length : 0), 0) : 0;
  const current = readStore(DRAFTS_KEY);
  const replaced = Object.keys(doc.drafts).filter((k) => k in current && current[k] !== doc.drafts[k]).length;
  return {doc, summary: {drafts: Object.keys(doc.drafts).length, replaced, steps, exportedAt: doc.exported_at}};
}

function mergeProgress(current, incoming) {
  const merged = JSON.parse(JSON.stringify(current));
  for (const [id, steps] of Object.entries(incoming.exercises || {})) {
    if (!isObject(steps)) continue;
    merged.exercises[id] = merged.exercises[id] || {};
    for (const [step, rec] of Object.entries(steps)) {
      if (!isObject(rec)) continue;
      const mine = merged.exercises[id][step] || {};
      const both = {...mine, ...rec};
      if (mine.done || rec.done) both.done = true;
      if (mine.first) both.first = mine.first;
      merged.exercises[id][step] = both;
    }
  }
  for (const [id, rec] of Object.entries(incoming.lab || {})) {
    if (isObject(rec)) merged.lab[id] = {...(merged.lab[id] || {}), ...rec, done: Boolean((merged.lab[id] || {}).done || rec.done)};
  }
  return merged;
}

/* Merges a checked file (planImport's doc) into this browser's progress and drafts. */
export function applyImport(doc) {
  const progress = isObject(doc.progress) ? mergeProgress(loadProgress().progress, doc.progress)
                                          : loadProgress().progress;
  saveProgressDocument(progress);
  const drafts = readStore(DRAFTS_KEY);
  const kept = {...readStore(KEPT_KEY), ...(doc.kept_drafts || {})};
  let keptAside = 0;
  const at = new Date().toISOString();
  for (const [key, code] of Object.entries(doc.drafts)) {
    if (key in drafts && drafts[key] !== code) {
      kept[key] = {code: drafts[key], at, by: "import"};
      keptAside += 1;
    }
    drafts[key] = code;
  }
  localStorage.setItem(DRAFTS_KEY, JSON.stringify(drafts));
  localStorage.setItem(KEPT_KEY, JSON.stringify(kept));
  if (doc.guided !== undefined) {
    localStorage.setItem(GUIDED_KEY, JSON.stringify(mergeGuided(readStore(GUIDED_KEY), doc.guided)));
  }
  return {drafts: Object.keys(doc.drafts).length, keptAside};
}

/* ---- the page's buttons -------------------------------------------------------------------- */

export function mountWorkFile({before = () => {}, after = () => {}} = {}) {
  const $ = (id) => document.getElementById(id);
  const status = $("work-status");
  const ask = $("confirm-import");
  let importing = null;

  $("export-work").addEventListener("click", () => {
    before();
    const blob = new Blob([JSON.stringify(exportWork(), null, 1)], {type: "application/json"});
    const a = el("a", {href: URL.createObjectURL(blob), download: workFileName()});
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 10000);
    status.textContent = `Exported as ${a.download} (your downloads folder).`;
  });

  const close = () => {
    if (ask.hidden) return;
    ask.hidden = true;
    importing = null;
    $("import-work").value = "";
    $("import-work-button").focus();
  };
  $("import-work-button").addEventListener("click", () => $("import-work").click());
  $("import-work").addEventListener("change", async () => {
    const file = $("import-work").files[0];
    if (!file) return;
    status.textContent = "";
    try {
      const {doc, summary} = planImport(await file.text());
      importing = doc;
      $("confirm-import-text").textContent = `${file.name}: ${count(summary.drafts, "draft")} and progress on ` +
          `${count(summary.steps, "step")}` +
          (summary.exportedAt ? `, exported ${new Date(summary.exportedAt).toLocaleString()}` : "") +
          `. Import it? ${summary.replaced} of your drafts here ${summary.replaced === 1 ? "differs" : "differ"} ` +
          "and will be set aside (restorable).";
      ask.hidden = false;
      $("confirm-import-yes").focus();
    } catch (error) {
      status.textContent = `Not imported: ${error.message}.`;
      $("import-work").value = "";
    }
  });
  $("confirm-import-yes").addEventListener("click", () => {
    const doc = importing;
    close();
    if (!doc) return;
    before();
    const {drafts, keptAside} = applyImport(doc);
    after();
    status.textContent = `Imported ${count(drafts, "draft")} and the progress in the file` +
        (keptAside ? `; ${keptAside} of your drafts ${keptAside === 1 ? "was" : "were"} set aside ` +
                     "(Restore my draft, on its step)." : ".");
  });
  $("confirm-import-no").addEventListener("click", close);
  ask.addEventListener("keydown", (event) => {
    if (event.key !== "Escape") return;
    event.preventDefault();
    close();
  });
}
