/* "Next TODO" on the exercise page (Alt+T in the editor, and the Next TODO button): the cursor
 * goes to the next thing left to write in the step's code, and the line under the editor says
 * where, or that nothing is left.
 *
 * Left to write, on every step: a TODO, or a starter's `raise NotImplementedError`. On a Predict
 * step also each placeholder its starter leaves for the answer: a `None` outside a comment
 * (online-softmax's `standard = None`, ring's `bytes_sent = None`, break-it's
 * `"missing-rescale": None`); the jump selects the `None` itself, so typing replaces it. These are
 * the placeholders the grader refuses while any is left (nlpcore.lab.verdict: "... is still None").
 */
const TODO = /\bTODO\b|raise NotImplementedError/;
// Group 1, the placeholder, is what the editor selects (js/editor.js jumpToNext).
const PREDICT_TODO = /\bTODO\b|raise NotImplementedError|^[^#]*?\b(None)\b/;

const isPredict = (step) => Boolean(step) && step.kind === "Predict";

/* What "left to write" means on `step`: a RegExp for the editor's jumpToNext. */
export function todoPattern(step) {
  return isPredict(step) ? PREDICT_TODO : TODO;
}

/* Moves `editor`'s cursor to the next thing left to write on `step`; says where in `line`. */
export function nextTodo(editor, step, line) {
  const at = editor.jumpToNext(todoPattern(step));
  if (at !== null) {
    line.textContent = `Line ${at}.`;
  } else {
    line.textContent = isPredict(step) ? "No TODO or None placeholder left in your code."
                                       : "No TODO left in your code.";
  }
  return at;
}
