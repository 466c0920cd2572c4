/* The WGSL exercise (exercise.html?id=wgsl): the learner's shader on this page's GPU.
 *
 * Loaded by exercise.js because the exercise names it in extra.js_modules. It
 *   - gives the editor WGSL highlighting (a CodeMirror 5 simple mode, vendor/codemirror/addon/mode);
 *   - registers the check runner "webgpu": a job is a dispatch spec from nlpcore.lab.exercises.wgsl with
 *     the learner's shader inline (`code`). The runner compiles it with createShaderModule +
 *     getCompilationInfo (messages listed with line:col and marked in the editor), refuses a
 *     layout over the device's maxComputeWorkgroupStorageSize before any pipeline exists, runs the
 *     spec with js/gpu.js and hands the output bytes back for Python to compare with the mirror;
 *   - keeps a side panel: the adapter (or why WebGPU is unavailable), the workgroup memory of the
 *     learner's plan (bytes per array against 16384), and the measured time of their kernel
 *     against the lab's reference shader (wgsl/flash_fwd.wgsl) on the same inputs and adapter.
 *
 * A shader that does not compile fails the whole run (the runner's error has failsAll, so
 * js/check-runner.js turns every check, the Python ones included, into that compiler message).
 *
 * A shader that never finishes stops by itself: the job's `code` is the learner's shader with
 * every loop guarded (nlpcore.lab.exercises.wgsl.guard: a per-loop budget from the case's sizes,
 * the lines unchanged), and `meta.guard` carries the learner's own text (`source`), the name of
 * the storage buffer in which the guards count their trips, and the loops' lines. The runner
 * compiles `source` for its messages (the learner's lines and columns), runs `code`, and hands
 * the trips back with o and lse; Python fails the check with the loop's line and budget. A
 * tripped loop costs seconds even on a CPU adapter, the device stays usable for the next run,
 * and the run's other GPU checks of the same shader are not started. Timing runs the learner's
 * own `source`, and only after its guarded run finished without a trip on the same inputs. The
 * GPU time limit stays as a backstop: after it the device is destroyed and a fresh one opened.
 *
 * Python decides the plan and the bytes (nlpcore.lab.exercises.wgsl reads the shader's override and
 * var<workgroup> declarations); this module only shows them. Hooks for tests: [data-testid=
 * wgsl-panel], gpu-status (data-state checking|ready|unavailable), tile-bytes (data-bytes),
 * compile-messages (data-state none|ok|error), timing (data-state idle|ready).
 */
import {registerCheckRunner} from "../check-runner.js";
import {openGpu, runSpec} from "../gpu.js";
import {el} from "../dom.js";

const TIMING_REPEATS = 3;
const GPU_TIME_LIMIT_MS = 30000;  // a backstop: the loop guard stops an endless shader first
let stuck = null;  // {source, caseText}: a shader that did not finish; its other checks are not run
let tripped = null;  // {source, caseId, caseText, loop}: this run's shader ran past a loop budget
const $ = (id) => document.getElementById(id);

/* ---- editor: WGSL highlighting and compiler marks ------------------------------------------ */

const WGSL_MODE = {
  start: [
    {regex: /\/\/.*/, token: "comment"},
    {regex: /\/\*/, token: "comment", next: "comment"},
    {regex: /@\s*\w+/, token: "meta"},
    {regex: /(?:fn|let|var|const|override|struct|return|if|else|for|while|loop|break|continue|continuing|switch|case|default|discard|alias|enable|requires|diagnostic|const_assert)\b/, token: "keyword"},
    {regex: /(?:f32|f16|i32|u32|bool|vec[234][fhiu]?|mat[234]x[234][fh]?|array|atomic|ptr)\b/, token: "type"},
    {regex: /(?:uniform|storage|workgroup|private|function|read_write|read|write)\b/, token: "qualifier"},
    {regex: /(?:true|false)\b/, token: "atom"},
    {regex: /0[xX][0-9a-fA-F]+[iu]?|(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?[fh]?|\d+[eE][+-]?\d+[fh]?|\d+[iufh]?/, token: "number"},
    {regex: /(?:workgroupBarrier|storageBarrier|workgroupUniformLoad|select|min|max|exp|exp2|log|log2|sqrt|dot|abs|clamp|arrayLength|atomic\w+)\b/, token: "builtin"},
    {regex: /[A-Z][A-Z0-9_]*\b/, token: "variable-2"},
    {regex: /[a-zA-Z_]\w*/, token: "variable"},
    {regex: /[-+*/%=<>!&|^~]+/, token: "operator"},
    {regex: /[{[(]/, indent: true},
    {regex: /[}\])]/, dedent: true},
  ],
  comment: [
    {regex: /.*?\*\//, token: "comment", next: "start"},
    {regex: /.*/, token: "comment"},
  ],
  meta: {lineComment: "//", blockCommentStart: "/*", blockCommentEnd: "*/", electricChars: "}"},
};

function loadScript(src) {
  return new Promise((resolve, reject) => {
    const s = document.createElement("script");
    s.src = src;
    s.onload = resolve;
    s.onerror = () => reject(new Error(`${src} did not load`));
    document.head.append(s);
  });
}

function editorCm() {
  const wrapper = document.querySelector("#editor-host .CodeMirror");
  return wrapper ? wrapper.CodeMirror : null;
}

/* Defines the "wgsl" mode; exercise.js imports this module before it creates the editor with
 * the exercise's extra.language, so the mode exists by then (this module awaits it). */
async function defineMode() {
  const CM = window.CodeMirror;
  if (!CM) return "CodeMirror did not load";
  if (!CM.defineSimpleMode) {
    await loadScript(new URL("../../vendor/codemirror/addon/mode/simple.js", import.meta.url).href);
  }
  CM.defineSimpleMode("wgsl", WGSL_MODE);
  return null;
}

const PHONE_WIDTH = "(max-width: 640px)";  // as css/exercise.css's phone layout

function configureEditor(cm) {
  cm.setOption("mode", "wgsl");
  cm.setOption("indentUnit", 2);
  cm.setOption("tabSize", 2);
  // The shaders' header comments are wide: wrapped where the editor is wide enough, but on a
  // phone wrapping turned a 355-line shader into ~12 lines per screen, so there long lines
  // scroll sideways inside the editor instead.
  const phone = window.matchMedia(PHONE_WIDTH);
  const wrapUnlessPhone = () => cm.setOption("lineWrapping", !phone.matches);
  wrapUnlessPhone();
  phone.addEventListener("change", wrapUnlessPhone);
  // Tab, Shift-Tab, Esc and the page's shortcuts stay editor.js's (its extraKeys): with
  // indentUnit/tabSize 2, Tab inserts two spaces; Esc, then Tab leaves the editor.
  cm.on("change", () => clearMarks());
  cm.refresh();
}

function whenEditorReady(callback) {
  const cm = editorCm();
  if (cm) {
    callback(cm);
    return;
  }
  const observer = new MutationObserver(() => {
    const created = editorCm();
    if (created) {
      observer.disconnect();
      callback(created);
    }
  });
  observer.observe($("editor-host"), {childList: true, subtree: true});
}

const marks = [];

function clearMarks() {
  const cm = editorCm();
  while (marks.length) {
    const mark = marks.pop();
    if (mark.clear) mark.clear();
    else if (cm) cm.removeLineClass(mark.line, "background", "wgsl-error-line");
  }
}

function markMessages(messages) {
  const cm = editorCm();
  if (!cm) return;
  clearMarks();
  for (const m of messages) {
    if (m.type !== "error" || !m.lineNum) continue;
    const line = m.lineNum - 1;
    const from = {line, ch: Math.max(0, m.linePos - 1)};
    const to = {line, ch: Math.max(from.ch + 1, from.ch + (m.length || 1))};
    marks.push(cm.markText(from, to, {className: "wgsl-error-mark", title: m.message}));
    cm.addLineClass(line, "background", "wgsl-error-line");
    marks.push({line});
    const widget = el("div", {class: "wgsl-error-widget", "data-testid": "compile-error-widget",
                              text: `line ${m.lineNum}:${m.linePos} ${m.message}`});
    marks.push(cm.addLineWidget(line, widget));
  }
  const first = messages.find((m) => m.type === "error" && m.lineNum);
  if (first) cm.scrollIntoView({line: first.lineNum - 1, ch: 0}, 80);
}

/* Marks the loop a guard stopped, as a compiler error is marked (until the next edit). */
function markLoop(loop, caseText) {
  const cm = editorCm();
  const text = cm ? cm.getLine(loop.line - 1) || "" : "";
  const at = text.search(/\b(for|while|loop)\b/);
  markMessages([{type: "error", lineNum: loop.line, linePos: at < 0 ? 1 : at + 1,
                 length: loop.kind.length,
                 message: `this \`${loop.kind}\` loop ran past its budget of ${loop.budget} ` +
                          `iterations on ${caseText} and was stopped`}]);
}

/* ---- side panel ----------------------------------------------------------------------------- */

const panel = {layouts: new Map(), timings: new Map()};

function buildPanel() {
  const host = $("editor-host");
  const aside = el("aside", {class: "wgsl-panel", "data-testid": "wgsl-panel",
                             "aria-label": "Your shader on this GPU"},
    el("h3", {text: "Your shader on this GPU"}),
    el("p", {id: "wgsl-gpu", class: "small", "data-testid": "gpu-status", "data-state": "checking",
             text: "Looking for a WebGPU adapter…"}),
    el("h4", {text: "Workgroup memory of your plan"}),
    el("div", {id: "wgsl-layout", "data-testid": "wgsl-layout"}),
    el("h4", {text: "Compiler messages"}),
    el("ul", {id: "wgsl-messages", class: "wgsl-messages", "data-testid": "compile-messages",
              "data-state": "none"}, el("li", {class: "small", text: "Not compiled yet."})),
    el("h4", {text: "Time on this adapter"}),
    el("div", {id: "wgsl-timing", "data-testid": "timing", "data-state": "idle"}));
  const wrap = el("div", {class: "wgsl-workspace"});
  host.parentNode.insertBefore(wrap, host);
  wrap.append(host, aside);
  renderLayout();
  renderTiming();
  const cm = editorCm();
  if (cm) cm.refresh();
}

function setGpuStatus(state, text) {
  const p = $("wgsl-gpu");
  p.dataset.state = state;
  p.textContent = text;
}

function renderLayout() {
  const box = $("wgsl-layout");
  box.replaceChildren();
  if (!panel.layouts.size) {
    box.append(el("p", {class: "small", text: "Run the checks: each case's tile plan (BR, BC from " +
                                              "your overrides or the host's plan) and its bytes " +
                                              "appear here."}));
    return;
  }
  let worst = null;
  for (const entry of panel.layouts.values()) {
    if (!worst || entry.layout.bytes_used > worst.layout.bytes_used) worst = entry;
  }
  const lay = worst.layout;
  const limit = lay.storage_limit;
  const over = lay.bytes_used > limit;
  box.append(el("p", {class: "small", text:
    `Largest use: case ${worst.caseText}, BR = ${lay.br}, BC = ${lay.bc}, D = ${lay.d}, ` +
    `DV = ${lay.dv}, ${lay.workgroup_size} invocations.`}));
  const bar = el("div", {class: "wgsl-bar" + (over ? " over" : ""), role: "img",
                         "aria-label": `${lay.bytes_used} of ${limit} bytes`});
  const scale = Math.max(limit, lay.bytes_used);
  for (const a of lay.arrays) {
    const part = el("span", {class: "part", title: `${a.name}: ${a.bytes} bytes`,
                             text: a.bytes / scale > 0.08 ? a.name : ""});
    part.style.width = `${(100 * a.bytes / scale).toFixed(2)}%`;
    bar.append(part);
  }
  if (!over) {
    const free = el("span", {class: "free", title: `unused: ${limit - lay.bytes_used} bytes`});
    free.style.width = `${(100 * (limit - lay.bytes_used) / scale).toFixed(2)}%`;
    bar.append(free);
  }
  box.append(bar);
  const table = el("table", {class: "wgsl-table"},
    el("thead", {}, el("tr", {}, el("th", {text: "array"}), el("th", {text: "bytes"}),
                       el("th", {text: "line"}))));
  const body = el("tbody");
  for (const a of lay.arrays) {
    body.append(el("tr", {}, el("td", {}, el("code", {text: a.name})),
                   el("td", {class: "num", text: String(a.bytes)}),
                   el("td", {class: "num", text: String(a.line)})));
  }
  body.append(el("tr", {class: "total"}, el("th", {text: "total"}),
    el("td", {class: "num"}, el("span", {"data-testid": "tile-bytes", "data-bytes": String(lay.bytes_used),
                                         "data-limit": String(limit), "data-over": over ? "1" : "0",
                                         text: `${lay.bytes_used} / ${limit}`})),
    el("td", {text: over ? "over the limit" : `${limit - lay.bytes_used} free`})));
  table.append(body);
  box.append(table);
  if (panel.layouts.size > 1) {
    const list = el("ul", {class: "small wgsl-cases"});
    for (const entry of panel.layouts.values()) {
      list.append(el("li", {text: `${entry.caseText}: BR ${entry.layout.br}, BC ${entry.layout.bc}, ` +
                                  `${entry.layout.bytes_used} bytes`}));
    }
    box.append(list);
  }
}

function renderMessages(messages, state) {
  const list = $("wgsl-messages");
  list.dataset.state = state;
  list.replaceChildren();
  if (!messages.length) {
    list.append(el("li", {class: "small", text: "Compiled with no messages."}));
    return;
  }
  for (const m of messages) {
    list.append(el("li", {class: `msg-${m.type}`, "data-line": String(m.lineNum)},
                   el("strong", {text: `line ${m.lineNum}:${m.linePos}`}), ` ${m.type}: ${m.message}`));
  }
}

function renderTiming() {
  const box = $("wgsl-timing");
  box.replaceChildren();
  box.dataset.state = "idle";
  if (!panel.timings.size) {
    box.append(el("p", {class: "small", text: "Measured when a timing case runs: your kernel and " +
                                              "the lab's wgsl/flash_fwd.wgsl on the same inputs."}));
    return;
  }
  box.dataset.state = "ready";
  for (const t of panel.timings.values()) {
    const table = el("table", {class: "wgsl-table", "data-case": t.caseId},
      el("caption", {text: t.caseText}),
      el("thead", {}, el("tr", {}, el("th", {text: "kernel"}), el("th", {text: "BR × BC"}),
                         el("th", {class: "num", text: "time"}))));
    table.append(el("tbody", {},
      el("tr", {}, el("td", {text: "yours"}), el("td", {text: `${t.br} × ${t.bc}`}),
         el("td", {class: "num", "data-testid": "time-yours", text: `${t.mine.toFixed(1)} ms`})),
      el("tr", {}, el("td", {}, el("code", {text: "flash_fwd.wgsl"})), el("td", {text: `${t.refBr} × ${t.refBc}`}),
         el("td", {class: "num", "data-testid": "time-reference", text: `${t.ref.toFixed(1)} ms`})),
      el("tr", {class: "total"}, el("th", {text: "yours / reference"}), el("td"),
         el("td", {class: "num", text: `${(t.mine / t.ref).toFixed(2)}×`}))));
    box.append(table);
  }
  box.append(el("p", {class: "small", text:
    `Median of ${TIMING_REPEATS} runs each after a warm-up, from submit to read-back, on ` +
    `${gpuName || "this adapter"}. A CPU adapter (SwiftShader) ranks kernels differently from a GPU.`}));
}

/* ---- the runner ------------------------------------------------------------------------------ */

let gpuPromise = null;
let gpuName = "";

function gpu() {
  if (!gpuPromise) {
    gpuPromise = openGpu().then((g) => {
      gpuName = g.name;
      setGpuStatus("ready", `WebGPU adapter: ${g.name}; maxComputeWorkgroupStorageSize ` +
                   `${g.limits.maxComputeWorkgroupStorageSize} bytes (default limits).`);
      return g;
    }, (error) => {
      setGpuStatus("unavailable", `WebGPU is unavailable: ${error.message}. The GPU checks cannot ` +
          "run here; the checks marked “runs without WebGPU” (interface, memory, mirror only) " +
          "still grade your shader in Python.");
      throw error;
    });
  }
  return gpuPromise;
}

const compiled = new Map();  // code -> Promise<messages>

/* After a dispatch that never finished: drop the device (its queue is stuck behind the endless
 * shader) so that the next run opens a fresh one. */
function abandonDevice(g) {
  gpuPromise = null;
  compiled.clear();
  try {
    g.device.destroy();
  } catch (error) {
    /* already lost: nothing to release */
  }
  setGpuStatus("checking", "The GPU device was recreated after a shader did not finish; the " +
               "next run opens a fresh one.");
}

function compileMessages(device, code) {
  if (!compiled.has(code)) {
    compiled.clear();
    const module = device.createShaderModule({label: "your shader", code});
    compiled.set(code, module.getCompilationInfo().then((info) => info.messages.map((m) => ({
      type: m.type, message: m.message, lineNum: m.lineNum, linePos: m.linePos,
      length: m.length}))));
  }
  return compiled.get(code);
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

async function time(g, spec) {
  const runs = [];
  for (let i = 0; i < TIMING_REPEATS; i += 1) runs.push((await runSpec(g, spec)).gpuMs);
  return median(runs);
}

let lastCode = null;

/* A new shader (or a new run of the same one after editing) starts a fresh panel. */
function startRun(code) {
  if (code === lastCode) return;
  lastCode = code;
  stuck = null;
  panel.layouts.clear();
  panel.timings.clear();
  renderLayout();
  renderTiming();
  const list = $("wgsl-messages");
  list.dataset.state = "none";
  list.replaceChildren(el("li", {class: "small", text: "Not compiled: no check of this shader " +
                                                       "has reached the GPU yet."}));
}

function withinTimeLimit(promise) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const error = new Error(`the GPU did not finish within ${GPU_TIME_LIMIT_MS / 1000} s, although ` +
                              "the lab bounds every loop of your shader (a very slow adapter?); " +
                              "the GPU device was recreated");
      error.timedOut = true;
      reject(error);
    }, GPU_TIME_LIMIT_MS);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/* The loop a guarded run stopped, from its trips buffer (a u32 per loop: how often its guard
 * stopped it), or null: of those that tripped, the first not inside another that did, as
 * Python's guard.runaway chooses (an endless outer loop drives the loops inside it too). */
function trippedLoop(guard, outputs) {
  const bytes = guard && outputs[guard.name];
  if (!bytes) return null;
  const counts = new Uint32Array(bytes.buffer, bytes.byteOffset, Math.floor(bytes.byteLength / 4));
  const tripped = guard.loops.filter((_, i) => counts[i] > 0);
  const ids = new Set(guard.loops.map((_, i) => i).filter((i) => counts[i] > 0));
  return tripped.find((loop) => !loop.within.some((i) => ids.has(i))) || tripped[0] || null;
}

async function runJob(job) {
  const meta = job.meta || {};
  const guard = meta.guard || null;
  const source = guard ? guard.source : job.code;  // what the learner wrote
  const caseText = meta.case_text || meta.case || "the first GPU case";
  startRun(source);
  if (stuck && stuck.source === source) {
    throw new Error(`not run: this shader did not finish within ${GPU_TIME_LIMIT_MS / 1000} s on ` +
                    `${stuck.caseText}; fix it and run the checks again`);
  }
  if (tripped && (tripped.source !== source || tripped.caseId === meta.case)) tripped = null;  // a new run
  if (tripped) {
    throw new Error(`not run: the \`${tripped.loop.kind}\` loop on line ${tripped.loop.line} ran ` +
                    `past its budget on ${tripped.caseText} (see that check); fix it and run the ` +
                    "checks again");
  }
  if (meta.layout) {
    panel.layouts.set(meta.case, {caseText: meta.case_text, layout: meta.layout});
    renderLayout();
  }
  const g = await gpu();
  const limit = g.limits.maxComputeWorkgroupStorageSize;
  if (meta.layout && meta.layout.bytes_used > limit) {
    throw new Error(`refused: your shader needs ${meta.layout.bytes_used} bytes of workgroup ` +
                    `storage, over this device's maxComputeWorkgroupStorageSize of ${limit}`);
  }
  const messages = await compileMessages(g.device, source);
  const errors = messages.filter((m) => m.type === "error");
  renderMessages(messages, errors.length ? "error" : "ok");
  markMessages(messages);
  if (errors.length) {
    const error = new Error("WGSL compilation failed: " +
                            errors.map((m) => `line ${m.lineNum}:${m.linePos} ${m.message}`).join("; "));
    error.failsAll = true;  // no check can use a shader that does not compile
    throw error;
  }
  let outputs;
  try {
    ({outputs} = await withinTimeLimit(runSpec(g, job)));
  } catch (error) {
    if (error.timedOut) {
      stuck = {source, caseText};
      abandonDevice(g);
    } else if (guard && /WGSL compilation failed/.test(error.message)) {
      throw new Error("your shader compiles, but not with the lab's loop guard added (a bug in " +
                      `the lab: please report it): ${error.message}`);
    }
    throw error;
  }
  const loop = trippedLoop(guard, outputs);
  if (loop) {  // Python's verify says so; the other GPU checks of this shader are not started
    tripped = {source, caseId: meta.case, caseText, loop};
    markLoop(loop, caseText);
    return outputs;
  }
  if (meta.reference) {  // it ended on these inputs: time the learner's own text, unguarded
    const mineSpec = guard ? {...job, code: source, bindings: job.bindings.filter((b) => b.name !== guard.name)}
                           : job;
    const ref = meta.reference;
    const refSpec = {...mineSpec, code: undefined, shader: ref.shader, constants: ref.constants,
                     workgroups: ref.workgroups,
                     bindings: [...mineSpec.bindings, ...(ref.bindings || [])]
                         .sort((a, b) => a.binding - b.binding)};
    await runSpec(g, refSpec);  // warm-ups: pipeline creation
    if (mineSpec !== job) await runSpec(g, mineSpec);
    const mine = await time(g, mineSpec);
    const reference = await time(g, refSpec);
    panel.timings.set(meta.case, {caseId: meta.case, caseText: meta.case_text, mine, ref: reference,
                                  br: meta.layout.br, bc: meta.layout.bc, refBr: ref.br, refBc: ref.bc});
    renderTiming();
  }
  return outputs;
}

/* A refusal happens in Python before any job exists; its result carries the layout. */
document.addEventListener("exercise:graded", (event) => {
  const {result} = event.detail || {};
  if (!result || event.detail.exercise !== "wgsl") return;
  tripped = null;  // a new run tries every check again
  startRun(event.detail.code);
  for (const c of result.checks || []) {
    if (c.layout && c.layout.arrays) {
      panel.layouts.set(c.layout.case || c.id, {caseText: c.title, layout: c.layout});
    }
  }
  renderLayout();
});

function addStyles() {
  if (document.querySelector('link[href$="css/exercises/wgsl.css"]')) return;
  document.head.append(el("link", {rel: "stylesheet",
                                   href: new URL("../../css/exercises/wgsl.css", import.meta.url).href}));
}

addStyles();
buildPanel();
registerCheckRunner("webgpu", runJob);
gpu().catch(() => {});  // says in the panel which adapter runs the checks, or why none can
try {
  const problem = await defineMode();
  if (problem) throw new Error(problem);
} catch (error) {
  const box = $("editor-notice");
  box.hidden = false;
  box.textContent = `WGSL highlighting is unavailable: ${error.message}.`;
}
whenEditorReady(configureEditor);
