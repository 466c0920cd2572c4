/* The exercise page's keyboard: what Tab does in an editor, and the page-wide keys.
 *
 * The editors (js/editor.js) bind their own keys through CodeMirror's keymap: Tab indents while
 * they have focus, Esc then Tab leaves, Ctrl/Cmd+Enter runs the checks (Shift+Enter runs the
 * scratch cell). showKeyMode says under an editor which of those holds now. listenForKeys adds
 * the page-wide ones: Ctrl/Cmd+Enter runs the checks from anywhere outside an editor, and Esc
 * closes the open question (the first open one of `dialogs`), giving focus back.
 */

/* Says under an editor what Tab does now (see editor.js's onKeyMode). */
export function showKeyMode(line, mode, run) {
  line.dataset.mode = mode;
  line.textContent = mode === "leave"
    ? "Tab now leaves the editor (Shift+Tab goes back); any other key returns to editing."
    : mode === "indent" ? `Tab indents here. Esc, then Tab, leaves the editor. ${run}.` : "";
}

/* `run()` for Ctrl/Cmd+Enter; `dialogs`: [{box, close}], Esc closes the first one shown. */
export function listenForKeys({run, dialogs}) {
  document.addEventListener("keydown", (event) => {
    // Esc closes an open question even from inside an editor (whose own Esc, "Tab leaves next",
    // has already marked the event handled): the learner may have gone back to typing.
    if (event.key === "Escape") {
      const open = dialogs.find(({box}) => !box.hidden);
      if (!open) return;
      event.preventDefault();
      open.close();
      return;
    }
    if (event.defaultPrevented) return;
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.target.closest(".CodeMirror")) {
      event.preventDefault();
      run();
    }
  });
}
