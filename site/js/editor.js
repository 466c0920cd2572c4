// The code editor: CodeMirror 5 (vendored at vendor/codemirror/, loaded as classic scripts by
// the page) with Python highlighting. Without CodeMirror the page falls back to a plain
// <textarea> and says why, so exercises still work.

export function createEditor(host, {value = "", readOnly = false, mode = "python", label = "code"} = {}) {
  const textarea = document.createElement("textarea");
  textarea.value = value;
  textarea.setAttribute("aria-label", label);
  textarea.spellcheck = false;
  host.append(textarea);
  const CM = window.CodeMirror;
  if (!CM) {
    textarea.className = "plain-editor";
    textarea.readOnly = readOnly;
    return {
      fallback: "CodeMirror (vendor/codemirror/lib/codemirror.js) did not load; using a plain text box.",
      getValue: () => textarea.value,
      setValue: (text) => { textarea.value = text; },
      onChange: (cb) => textarea.addEventListener("input", cb),
      refresh: () => {},
      focus: () => textarea.focus(),
    };
  }
  const cm = CM.fromTextArea(textarea, {
    mode: mode === "diff" ? null : mode,
    lineNumbers: true,
    indentUnit: 4,
    tabSize: 4,
    indentWithTabs: false,
    matchBrackets: true,
    readOnly,
    viewportMargin: Infinity,
    extraKeys: {
      Tab: (editor) => editor.replaceSelection("    "),
    },
  });
  return {
    fallback: null,
    cm,
    getValue: () => cm.getValue(),
    setValue: (text) => cm.setValue(text),
    onChange: (cb) => cm.on("change", cb),
    refresh: () => cm.refresh(),
    focus: () => cm.focus(),
  };
}
