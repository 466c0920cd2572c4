/* The exercise page's scratch cell: runs code against the editor's definitions, ungraded.
 *
 * Each run calls exercises.scratch with keep=true, so the cell's namespace outlives the run
 * (variables stay; the editor's code runs again first, so edits there take effect) until the
 * learner resets it -- or another step is shown, or Python restarts (a time limit, or a cell
 * that changed the interpreter): the line [data-testid=scratch-namespace] (data-runs) says which.
 * A last-line value that is a 1-D or 2-D real array comes back as `plot` and is drawn
 * (js/scratch-plot.js): a line plot, or for 2-D a heatmap, with buttons to switch.
 */
import {el} from "./dom.js";
import {TIME_LIMIT_MS, overran} from "./check-runner.js";
import {renderStreams} from "./exercise-results.js";
import {drawPlot, plotKinds} from "./scratch-plot.js";

const $ = (id) => document.getElementById(id);

export class ScratchCell {
  constructor(runtime) {
    this.runtime = runtime;
    this.running = false;
    this.resetNext = true;   // the next run starts from a fresh namespace
    this.chart = null;
  }

  /* Forgets the namespace (the next run starts fresh) and clears the output. */
  reset() {
    this.resetNext = true;
    $("scratch-output").replaceChildren();
    $("scratch-output").dataset.state = "idle";
    this.showNamespace(0);
    this.offerPlot(null);
  }

  /* Runs `code` after `definitions` for one step; onRestart() when Python had to restart. */
  async run({exercise, step, definitions, code}, {onRestart = () => {}} = {}) {
    if (this.running) return;
    this.running = true;
    $("run-scratch").disabled = true;
    const output = $("scratch-output");
    output.dataset.state = "running";
    output.replaceChildren(el("p", {class: "small", text: "Running…"}));
    const reset = this.resetNext;
    this.resetNext = false;
    try {
      const out = await this.runtime.call("exercises.scratch",
          {exercise, step, definitions, code, keep: true, reset}, {timeoutMs: TIME_LIMIT_MS});
      renderStreams(output, out, "Nothing printed, and the last line is not an expression with a value.");
      output.dataset.state = out.traceback ? "error" : "done";
      const changed = out.restored && out.restored.length;
      this.showNamespace(changed ? 0 : out.runs, changed ? "the cell changed the interpreter, so Python " +
                         "was restarted, and the namespace with it" : null, reset);
      if (changed) this.resetNext = true;
      this.offerPlot(out.plot);
    } catch (error) {
      output.replaceChildren(el("p", {class: "notice", text: overran(error)
        ? `Stopped after ${TIME_LIMIT_MS / 1000} s (an infinite loop?). Python was restarted.`
        : `The scratch cell could not run: ${error.message}`}));
      output.dataset.state = "error";
      this.resetNext = true;
      this.showNamespace(0, "Python was restarted, and the namespace with it");
      this.offerPlot(null);
      if (overran(error)) onRestart();
    } finally {
      this.running = false;
      $("run-scratch").disabled = $("runtime-status").dataset.state !== "ready";
    }
  }

  /* How many runs the namespace has seen (0: fresh), and why it was lost if it was. */
  showNamespace(runs, lost = null, wasReset = true) {
    const line = $("scratch-namespace");
    const before = Number(line.dataset.runs);
    line.dataset.runs = String(runs);
    line.textContent = lost ? `Fresh namespace: ${lost}.`
      : runs === 0 ? "Fresh namespace."
        : runs === 1 && before > 0 && !wasReset ? "Fresh namespace (Python restarted since the last run): 1 run."
          : `Namespace kept: ${runs} run${runs === 1 ? "" : "s"} since it was last reset.`;
  }

  /* Offers to draw the cell's value (a 1-D or 2-D array) and draws it at once, the first way. */
  offerPlot(plot) {
    const choices = $("plot-choices");
    const host = $("scratch-plot");
    const kinds = plotKinds(plot);
    choices.hidden = kinds.length === 0;
    choices.replaceChildren();
    if (this.chart) this.chart.destroy();
    this.chart = null;
    host.replaceChildren();
    host.dataset.kind = "";
    if (!kinds.length) return;
    const draw = async (kind) => {
      try {
        if (this.chart) this.chart.destroy();
        this.chart = await drawPlot(host, plot, kind);
        for (const b of choices.querySelectorAll("button")) b.setAttribute("aria-pressed", String(b.dataset.kind === kind));
      } catch (error) {
        host.replaceChildren(el("p", {class: "notice", text: `The value cannot be drawn: ${error.message}.`}));
      }
    };
    choices.append(el("span", {class: "small", text: "Draw the value as:"}));
    for (const kind of kinds) {
      const button = el("button", {type: "button", class: "secondary", "data-kind": kind, "data-testid": `plot-${kind}`,
                                   text: kind === "heatmap" ? "heatmap" : "line plot"});
      button.addEventListener("click", () => draw(kind));
      choices.append(button);
    }
    draw(kinds[0]);
  }
}
