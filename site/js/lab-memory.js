/* What the lab page remembers across a reload, beside progress.js's passed steps: the problem
 * form, the answers typed or picked but not yet checked, which predictions were submitted, and
 * which hidden results the learner chose to see without predicting.
 *
 * One JSON document in localStorage under STORAGE_KEY:
 *   {form: {n, d, padding, heads, seed, causal, precision}, drafts: {stepId: answer},
 *    predicted: [stepId], revealed: [stepId]}
 * Without localStorage (private mode, blocked storage) it lives in memory for this visit.
 */
export const STORAGE_KEY = "fa-lab-guided-v1";

let memory = null;

function load() {
  if (memory) return memory;
  let doc = null;
  try {
    doc = JSON.parse(window.localStorage.getItem(STORAGE_KEY) || "null");
  } catch (error) {
    doc = null;
  }
  memory = {form: null, drafts: {}, predicted: [], revealed: [], ...(doc && typeof doc === "object" ? doc : {})};
  return memory;
}

function save() {
  try {
    window.localStorage.setItem(STORAGE_KEY, JSON.stringify(memory));
  } catch (error) {
    // storage blocked or full: keep the in-memory copy for this visit
  }
}

export const savedForm = () => load().form;
export function saveForm(values) {
  load().form = values;
  save();
}

export const draftOf = (stepId) => load().drafts[stepId];
export function saveDraft(stepId, answer) {
  const drafts = load().drafts;
  if (answer === null || answer === undefined || answer === "") delete drafts[stepId];
  else drafts[stepId] = answer;
  save();
}

function addTo(list, stepId) {
  const doc = load();
  if (!doc[list].includes(stepId)) doc[list].push(stepId);
  save();
}

export const isPredicted = (stepId) => load().predicted.includes(stepId);
export const markPredicted = (stepId) => addTo("predicted", stepId);
export const isRevealed = (stepId) => load().revealed.includes(stepId);
export const markRevealed = (stepId) => addTo("revealed", stepId);

/* Another tab changed the document: forget the cached copy. */
window.addEventListener("storage", (event) => {
  if (event.key === STORAGE_KEY) memory = null;
});
