/* Which Python the exercise page runs, and what that rules out.
 *
 * The learner's code runs in Pyodide (Python and NumPy versions reported by the worker), not in
 * the Python on their machine. showRuntimeNote(info) says so under the editor and lists the
 * newer features the page's versions lack -- only the rows newer than what the worker reports,
 * so the list stays true to the running Python.
 */
import {el} from "./dom.js";

/* [version, what] for features a newer Python or NumPy than the page's would allow. */
export const PYTHON_NEWER = [
  ["3.9", "dict merges with |, str.removeprefix/removesuffix, list[int] and dict[str, int] outside annotations"],
  ["3.10", "match statements, X | Y type unions at runtime, zip(..., strict=True)"],
  ["3.11", "except* and ExceptionGroup, tomllib"],
  ["3.12", "type X = ... aliases, f-strings reusing their own quotes"],
];
const NUMPY_NEWER = [
  ["1.20", "numpy.lib.stride_tricks.sliding_window_view, numpy.typing, where= in np.mean/np.std"],
  ["1.22", "np.quantile/np.percentile(method=...)"],
  ["2.0", "np.concat, np.permute_dims, np.pow, np.trapezoid (the NumPy 2 names)"],
];

/* True when dotted version `version` is newer than `than` ("3.10" > "3.8"). */
export function newer(version, than) {
  const a = String(version).split(".").map(Number);
  const b = String(than).split(".").map(Number);
  for (let i = 0; i < Math.max(a.length, b.length); i += 1) {
    const x = a[i] || 0;
    const y = b[i] || 0;
    if (x !== y) return x > y;
  }
  return false;
}

export function showRuntimeNote(note, info) {
  if (!info) return;
  const py = PYTHON_NEWER.filter(([v]) => newer(v, info.python));
  const np = NUMPY_NEWER.filter(([v]) => newer(v, info.numpy));
  const missing = py.map(([v, what]) => el("li", {text: `${what} (Python ${v})`}))
    .concat(np.map(([v, what]) => el("li", {text: `${what} (NumPy ${v})`})));
  note.replaceChildren(`Your code runs on Python ${info.python} with NumPy ${info.numpy} ` +
                       `(Pyodide ${info.pyodide}), not the Python on your machine.`);
  if (missing.length) {
    note.append(" ", el("details", {class: "rules-out"},
                        el("summary", {text: `What that rules out (${missing.length} newer features)`}),
                        el("ul", {}, ...missing)));
  }
  note.dataset.state = "ready";
  note.dataset.python = info.python;
  note.dataset.numpy = info.numpy;
}

/* ---- the learner's code does not run: which line, and is it a newer Python's? -------------- */

/* What stops the learner's code from loading: the grade's `problem` ({kind: "compile" | "load",
 * line, error, newer: {what, version} | null}, computed by nlpcore.lab.session with
 * nlpcore.lab.newer_python), or null. */
export function codeProblem(out) {
  const problem = out && out.problem;
  return problem && Number.isInteger(problem.line) ? problem : null;
}

/* One sentence for the learner: the line, the error, and the page's Python when that matters. */
export function describeProblem(problem, python) {
  const where = problem.kind === "compile" ? "does not compile" : "stops while loading";
  let text = `Your code ${where} at line ${problem.line}: ${problem.error}.`;
  if (problem.newer) {
    text += ` This page runs Python ${String(python || "3.8").split(".").slice(0, 2).join(".")} ` +
        `(Pyodide); ${problem.newer.what} came in Python ${problem.newer.version}.`;
  }
  return text;
}
