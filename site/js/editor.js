// The code editor: CodeMirror 5 (vendored at vendor/codemirror/, loaded as classic scripts by
// the page) with Python highlighting. Without CodeMirror the page falls back to a plain
// <textarea> and says why, so exercises still work.
//
// Keyboard (CodeMirror's own keymap, extraKeys): while the editor has focus, Tab indents (the
// selection, or four spaces at the cursor) and Shift-Tab dedents; Esc lets the next Tab or
// Shift-Tab leave the editor (the event is left to the browser), any other key takes that back.
// `keys` adds the page's shortcuts ({"Ctrl-Enter": fn, ...}, CodeMirror key names; each fn gets
// no argument). `onKeyMode(mode)` hears "indent" (focused: Tab indents),
// "leave" (after Esc: Tab leaves) and "away" (focus elsewhere), so the page can say which holds.
//
// Accessible name: `label` names the element that takes the keys — CodeMirror's own input
// (the original textarea is hidden) or the fallback textarea; `inputId` gives that element an
// id, so a page's <label for=…> can point at it; `describedBy` adds aria-describedby.

export function createEditor(host, {value = "", readOnly = false, mode = "python", label = "code",
                                    inputId = null, describedBy = null,
                                    keys = {}, onKeyMode = () => {}} = {}) {
  const textarea = document.createElement("textarea");
  textarea.value = value;
  textarea.setAttribute("aria-label", label);
  textarea.spellcheck = false;
  host.append(textarea);
  const nameInput = (input) => {
    input.setAttribute("aria-label", label);
    if (inputId) input.id = inputId;
    if (describedBy) input.setAttribute("aria-describedby", describedBy);
  };
  const CM = window.CodeMirror;
  if (!CM) {
    nameInput(textarea);
    textarea.className = "plain-editor";
    textarea.readOnly = readOnly;
    textarea.addEventListener("keydown", (event) => {
      const name = (event.ctrlKey ? "Ctrl-" : "") + (event.metaKey ? "Cmd-" : "") +
                   (event.shiftKey ? "Shift-" : "") + event.key;
      if (keys[name]) {
        event.preventDefault();
        keys[name]();
      }
    });
    return {
      fallback: "CodeMirror (vendor/codemirror/lib/codemirror.js) did not load; using a plain text box.",
      getValue: () => textarea.value,
      setValue: (text) => { textarea.value = text; },
      onChange: (cb) => textarea.addEventListener("input", cb),
      refresh: () => {},
      focus: () => textarea.focus(),
      markLine: () => {},
      clearMarks: () => {},
      jumpTo: () => {},
      getCursorLine: () => textarea.value.slice(0, textarea.selectionStart).split("\n").length,
      jumpToNext: (pattern) => {  // as CodeMirror's below, in the plain text box
        const lines = textarea.value.split("\n");
        const from = textarea.value.slice(0, textarea.selectionEnd).split("\n").length - 1;
        for (let k = 1; k <= lines.length; k += 1) {
          const line = (from + k) % lines.length;
          const span = matchSpan(pattern, lines[line]);
          if (!span) continue;
          const start = lines.slice(0, line).reduce((sum, text) => sum + text.length + 1, 0);
          textarea.focus();
          textarea.setSelectionRange(start + span[0], start + span[1]);
          return line + 1;
        }
        return null;
      },
    };
  }
  let leaving = false;  // after Esc: the next Tab / Shift-Tab leaves the editor
  const setLeaving = (on) => {
    leaving = on;
    onKeyMode(on ? "leave" : "indent");
  };
  const extraKeys = {
    Tab: (cm) => cm.execCommand(cm.somethingSelected() ? "indentMore" : "insertSoftTab"),
    "Shift-Tab": (cm) => cm.execCommand("indentLess"),
    Esc: () => setLeaving(true),
  };
  for (const [name, fn] of Object.entries(keys)) extraKeys[name] = () => fn();
  const cm = CM.fromTextArea(textarea, {
    mode: mode === "diff" ? null : mode,
    lineNumbers: true,
    indentUnit: 4,
    tabSize: 4,
    indentWithTabs: false,
    matchBrackets: true,
    readOnly,
    viewportMargin: Infinity,
    extraKeys,
  });
  nameInput(cm.getInputField());
  // After Esc, Tab is the browser's again: codemirrorIgnore keeps CodeMirror (and its default
  // keymap, which would indent) out of this one event, so focus moves on.
  cm.on("keydown", (_cm, event) => {
    if (!leaving) return;
    if (event.key === "Tab") event.codemirrorIgnore = true;
    else if (event.key !== "Escape" && event.key !== "Shift") setLeaving(false);
  });
  cm.on("focus", () => setLeaving(false));
  cm.on("blur", () => {
    leaving = false;
    onKeyMode("away");
  });
  const marks = [];
  return {
    fallback: null,
    cm,
    getValue: () => cm.getValue(),
    setValue: (text) => cm.setValue(text),
    onChange: (cb) => cm.on("change", cb),
    refresh: () => cm.refresh(),
    focus: () => cm.focus(),
    /* Marks 1-based line `line` with `className` until clearMarks(); returns the line marked. */
    markLine: (line, className) => {
      const at = Math.max(0, Math.min(cm.lineCount() - 1, line - 1));
      marks.push({handle: cm.addLineClass(at, "wrap", className), className});
      return at + 1;
    },
    clearMarks: () => {
      for (const {handle, className} of marks.splice(0)) cm.removeLineClass(handle, "wrap", className);
    },
    /* Puts the cursor at 1-based line `line`, column 0, scrolled into view, and focuses. */
    jumpTo: (line, ch = 0) => {
      cm.focus();
      cm.setCursor({line: line - 1, ch});
      cm.scrollIntoView(null, 80);
    },
    getCursorLine: () => cm.getCursor().line + 1,
    /* Moves to the next line after the cursor (wrapping) that matches `pattern` and selects the
     * match (see matchSpan); its 1-based number, or null when no line matches. */
    jumpToNext: (pattern) => {
      const n = cm.lineCount();
      const from = cm.getCursor().line;
      for (let k = 1; k <= n; k += 1) {
        const line = (from + k) % n;
        const span = matchSpan(pattern, cm.getLine(line));
        if (!span) continue;
        cm.focus();
        cm.setSelection({line, ch: span[0]}, {line, ch: span[1]});
        cm.scrollIntoView({from: {line, ch: 0}, to: {line, ch: 0}}, 80);
        return line + 1;
      }
      return null;
    },
  };
}

/* Where `pattern` matches in `text`, as [start, end], or null: the whole match, or its group 1
 * when it has one that matched (which must end the match: a placeholder after its context). */
function matchSpan(pattern, text) {
  const hit = pattern.exec(text);
  if (!hit) return null;
  if (hit[1] === undefined) return [hit.index, hit.index + hit[0].length];
  const start = hit.index + hit[0].length - hit[1].length;
  return [start, start + hit[1].length];
}
