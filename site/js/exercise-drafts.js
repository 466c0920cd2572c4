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

/* Saves editors' text as the learner types, and never over another tab's newer text.
 *
 * `onState(editor, text, state)` reports to the page ("pending" | "saved" | "unsaved" |
 * "conflict"); `onConflict({key, editor, theirs, mine})` is told when this browser's stored draft
 * for a key changed since this tab last read or wrote it (another tab typed in the same step):
 * the page asks the learner, then calls keepMine(key) or takeTheirs(key). Until then nothing is
 * written for that key. Changes are noticed twice: from the "storage" event other tabs' writes
 * fire here (watchOtherTabs), and by comparing before each write (a write that crosses the event).
 */
export class DraftSaver {
  constructor({onState = () => {}, onConflict = () => {}} = {}) {
    this.onState = onState;
    this.onConflict = onConflict;
    this.pending = null;      // {key, editor, timer}
    this.quiet = false;       // true while the page itself sets an editor's text
    this.base = new Map();    // key -> the stored text this tab last read or wrote
    this.editors = new Map(); // key -> the editor that shows it now
    this.conflicts = new Map(); // key -> {key, editor, theirs, mine}
  }

  /* The editor `editor` now shows the draft of `key` (stored text `stored`, or undefined). */
  shows(key, editor, stored) {
    for (const [k, e] of this.editors) {
      if (e !== editor) continue;
      this.editors.delete(k);
      // Left with the question open: this tab's text is kept, restorable, not lost.
      if (this.conflicts.delete(k) && editor.getValue() !== savedDraft(k)) keepDraft(k, editor.getValue(), "other-tab");
    }
    this.conflicts.delete(key);
    this.editors.set(key, editor);
    this.base.set(key, stored);
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
    if (!this.conflicts.has(key)) this.onState(editor, "Saving your draft…", "pending");
  }

  /* Writes `code` for `key` unless the stored draft moved on under this tab; true if written. */
  write(key, editor, code) {
    const stored = savedDraft(key);
    if (this.conflicts.has(key)) {
      this.conflicts.get(key).mine = code;
      this.onState(editor, "Not saved: another tab changed this draft — choose which to keep.", "conflict");
      return false;
    }
    if (this.base.has(key) && stored !== this.base.get(key) && stored !== code && stored !== undefined) {
      this.conflict(key, editor, stored, code);
      return false;
    }
    const ok = saveDraft(key, code);
    if (ok) this.base.set(key, code);
    this.onState(editor,
                 ok ? `Draft saved in this browser at ${clockTime(new Date().toISOString())}.`
                    : "This browser does not let the page save drafts: copy your code before you leave.",
                 ok ? "saved" : "unsaved");
    return ok;
  }

  flush() {
    const pending = this.pending;
    if (!pending) return;
    clearTimeout(pending.timer);
    this.pending = null;
    this.write(pending.key, pending.editor, pending.editor.getValue());
  }

  conflict(key, editor, theirs, mine) {
    const known = this.conflicts.get(key);
    const entry = {key, editor, theirs, mine};
    this.conflicts.set(key, entry);
    this.onState(editor, "Not saved: another tab changed this draft — choose which to keep.", "conflict");
    if (!known || known.theirs !== theirs) this.onConflict(entry);
  }

  /* This tab's text wins: it is written (the other tab is told in turn). */
  keepMine(key) {
    const entry = this.conflicts.get(key);
    if (!entry) return;
    this.conflicts.delete(key);
    this.base.set(key, savedDraft(key));
    this.write(key, entry.editor, entry.editor.getValue());
  }

  /* The other tab's text wins: it goes into the editor; this tab's is kept, restorable. */
  takeTheirs(key) {
    const entry = this.conflicts.get(key);
    if (!entry) return;
    this.conflicts.delete(key);
    if (this.pending && this.pending.key === key) {
      clearTimeout(this.pending.timer);
      this.pending = null;
    }
    const mine = entry.editor.getValue();
    const theirs = savedDraft(key);
    if (mine !== theirs) keepDraft(key, mine, "other-tab");
    this.setText(entry.editor, theirs === undefined ? "" : theirs);
    this.base.set(key, theirs);
    this.onState(entry.editor, "The other tab's version is in the editor; yours is kept (Restore my draft).", "saved");
  }

  /* Listens for other tabs' writes to this browser's drafts. */
  watchOtherTabs() {
    window.addEventListener("storage", (event) => {
      if (event.key !== DRAFTS_KEY) return;
      let all = {};
      try {
        all = JSON.parse(event.newValue || "{}") || {};
      } catch (error) {
        return;
      }
      for (const [key, editor] of this.editors) {
        const theirs = all[key];
        if (theirs === this.base.get(key)) continue;
        const mine = this.pending && this.pending.key === key ? this.pending.editor.getValue() : editor.getValue();
        if (theirs === mine || theirs === undefined) {
          this.base.set(key, theirs);
          continue;
        }
        this.conflict(key, editor, theirs, mine);
      }
    });
  }
}
