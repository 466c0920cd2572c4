/* Drafts of the exercise page: what the learner typed, saved per step in localStorage.
 *
 *   drafts        {<exercise>/<step>: code, <exercise>/<step>#scratch: code}   (DRAFTS_KEY)
 *   kept drafts   {<exercise>/<step>: {code, at, by: "solution" | "starter"}} (KEPT_KEY): a
 *                 draft set aside when the editor was replaced by the solution or the starter,
 *                 restorable with one click, also after a reload.
 *
 * DraftSaver saves an editor's text after a pause in typing (and at once on flush(), before the
 * step or the page changes); the key is the step the text was typed in, not the step shown when
 * the timer fires. Storage that refuses writes (private mode) is reported, never thrown.
 */

export const DRAFTS_KEY = "fa-lab-drafts-v1";
export const KEPT_KEY = "fa-lab-kept-drafts-v1";
const SAVE_DELAY_MS = 300;

export function readStore(name) {
  try {
    const doc = JSON.parse(localStorage.getItem(name) || "{}");
    return doc && typeof doc === "object" && !Array.isArray(doc) ? doc : {};
  } catch (error) {
    return {};
  }
}

/* Sets (or with value undefined, removes) one entry; false when storage is unavailable. */
export function writeStore(name, key, value) {
  try {
    const all = readStore(name);
    if (value === undefined) delete all[key];
    else all[key] = value;
    localStorage.setItem(name, JSON.stringify(all));
    return true;
  } catch (error) {
    return false;
  }
}

export const savedDraft = (key) => readStore(DRAFTS_KEY)[key];
export const saveDraft = (key, code) => writeStore(DRAFTS_KEY, key, code);

export function keptDraft(key) {
  const kept = readStore(KEPT_KEY)[key];
  return kept && typeof kept.code === "string" ? kept : null;
}

export const keepDraft = (key, code, by) => writeStore(KEPT_KEY, key, {code, at: new Date().toISOString(), by});
export const dropKeptDraft = (key) => writeStore(KEPT_KEY, key, undefined);

export function clockTime(iso) {
  return new Date(iso).toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"});
}

/* Saves editors' text as the learner types. `onState(editor, text, state)` reports to the page
 * ("pending" | "saved" | "unsaved"); `onSaved(key, code)` is told of every write. */
export class DraftSaver {
  constructor({onState = () => {}, onSaved = () => {}} = {}) {
    this.onState = onState;
    this.onSaved = onSaved;
    this.pending = null;    // {key, editor, timer}
    this.quiet = false;     // true while the page itself sets an editor's text
  }

  /* Sets an editor's text without that counting as typing. */
  setText(editor, text) {
    this.quiet = true;
    try {
      editor.setValue(text);
    } finally {
      this.quiet = false;
    }
  }

  schedule(editor, key) {
    if (this.quiet) return;
    if (this.pending && this.pending.key !== key) this.flush();
    if (this.pending) clearTimeout(this.pending.timer);
    this.pending = {key, editor, timer: setTimeout(() => this.flush(), SAVE_DELAY_MS)};
    this.onState(editor, "Saving your draft…", "pending");
  }

  flush() {
    const pending = this.pending;
    if (!pending) return;
    clearTimeout(pending.timer);
    this.pending = null;
    const code = pending.editor.getValue();
    const ok = saveDraft(pending.key, code);
    if (ok) this.onSaved(pending.key, code);
    this.onState(pending.editor,
                 ok ? `Draft saved in this browser at ${clockTime(new Date().toISOString())}.`
                    : "This browser does not let the page save drafts: copy your code before you leave.",
                 ok ? "saved" : "unsaved");
  }
}
