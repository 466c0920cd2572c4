/* The performance page: draws the recorded benchmark results (bench/results/*.json) with Chart.js.
 *
 * Nothing here measures anything: the numbers come from the scripts in bench/ (see
 * bench/README.md), copied into the built site by build.py. Which result files exist is read
 * from manifest.json first, so a result not yet recorded shows "not yet recorded" instead of
 * a failed request. Each record has one module under js/perf/ that says its path, its label in
 * the targets table, its section's id and how to show it; the shared chart and number helpers
 * are js/perf/charts.js and js/perf/format.js. Without Chart.js the tables still fill in and
 * the page says why there are no plots.
 *
 * Hooks: every section has data-status = loading | recorded | not-recorded | error;
 * [data-testid=perf-targets] lists every target with data-status = met | missed | not-measured.
 */
import {mountGpuBench} from "./gpu-bench.js";
import {chartAvailable} from "./perf/charts.js";
import {$} from "./perf/format.js";
import {listedFiles, loadResult} from "./perf/records.js";
import {showTargets} from "./perf/targets.js";
import numpy from "./perf/numpy.js";
import webgpu from "./perf/webgpu.js";
import webgpuH200 from "./perf/webgpu-h200.js";
import io from "./perf/io.js";
import readiness from "./perf/readiness.js";
import triton from "./perf/triton.js";
import iohw from "./perf/iohw.js";
import splitk from "./perf/splitk.js";
import ring from "./perf/ring.js";

/* In page order; each {key, path, label, section, show(record)}. */
const SECTIONS = [numpy, webgpu, webgpuH200, io, readiness, triton, iohw, splitk, ring];

function setSection(id, status, note) {
  const section = $(id);
  section.dataset.status = status;
  if (note) {
    const p = document.createElement("p");
    p.className = status === "error" ? "notice error-text" : "notice";
    p.textContent = note;
    section.insertBefore(p, section.querySelector("h2").nextSibling);
  }
}

async function main() {
  mountGpuBench($("gpu-bench"));
  $("chart-status").textContent = chartAvailable() ? "" :
      "Plots are unavailable: the vendored Chart.js (vendor/chartjs/chart.umd.js) did not load, so only the tables are shown.";
  const files = await listedFiles();
  const loaded = await Promise.all(SECTIONS.map(async (section) => ({section, result: await loadResult(section.path, files)})));
  showTargets(loaded);
  for (const {section, result} of loaded) {
    if (result.missing) {
      setSection(section.section, "not-recorded", `Not yet recorded: ${section.path} is not in this build. ` +
                 "Run the benchmark named in bench/README.md, then rebuild the site.");
      continue;
    }
    if (result.error) {
      setSection(section.section, "error", result.error);
      continue;
    }
    try {
      section.show(result.data);
      setSection(section.section, "recorded");
    } catch (error) {
      console.warn(`${section.path}: ${error.message}`);
      setSection(section.section, "error", `${section.path} could not be shown: ${error.message}`);
    }
  }
}

main();
