/* Pyodide in a classic Web Worker: the page never freezes while Python runs.
 *
 * Boot (each stage is reported to the page as {type: "progress", stage, message}):
 *   runtime  - importScripts(vendor/pyodide/pyodide.js) and loadPyodide({indexURL})
 *   numpy    - pyodide.loadPackage(["numpy", "micropip"]), then an import to verify it
 *              (loadPackage in Pyodide 0.17 reports failures but does not throw)
 *   nlpcore  - micropip.install(<the wheel listed in manifest.json>), then import nlpcore.web
 * then {type: "ready", info} or {type: "boot-error", error}.
 *
 * Requests {id, name, payload} are answered with {id, result} or {id, error, traceback}:
 * nlpcore.web.call_json(name, json) runs the Python function (see py/nlpcore/web/__init__.py).
 * Bytes (typed arrays) and non-finite numbers travel through that JSON (nlpcore.plain) tagged as
 * {"__bytes__": base64} and {"__float__": "inf"|"-inf"|"nan"}; replies carry Uint8Array.
 *
 * The only Python source here is fixed bootstrap text; learner code and every value travel
 * as arguments, never pasted into source strings.
 *
 * Started as pyworker.js?role=judge, the worker is a grade's judge: it answers only the calls
 * that judge (JUDGE_CALLS), none of which runs learner code, so its Python never sees any.
 */
"use strict";

const SITE = new URL("../", self.location.href);  // js/pyworker.js -> site root
const INDEX_URL = new URL("vendor/pyodide/", SITE).href;

const ROLE = new URLSearchParams(self.location.search).get("role") || "learner";
const JUDGE_CALLS = new Set(["exercises.judge", "exercises.conclude", "exercises.verify"]);

let web = null;          // PyProxy of the nlpcore.web module once booted
let bootError = null;    // a stated reason when booting failed
const queue = [];        // requests that arrived before boot finished

const STAGE_TASKS = {
  runtime: "loading the Pyodide runtime from vendor/pyodide/",
  numpy: "loading NumPy and micropip from vendor/pyodide/",
  nlpcore: "installing the nlpcore wheel from wheels/",
};
let stage = "runtime";   // the boot stage under way, named in a boot error

function progress(next, message) {
  if (next in STAGE_TASKS) stage = next;
  self.postMessage({type: "progress", stage: next, message});
}

// ---- plain data <-> tagged JSON ------------------------------------------------------------

// The page modules share js/dom.js's base64 helpers; this is a classic worker (it loads Pyodide
// with importScripts), which cannot import an ES module, so it keeps its own two.
function bytesToBase64(bytes) {
  let binary = "";
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode.apply(null, bytes.subarray(i, i + chunk));
  }
  return btoa(binary);
}

function base64ToBytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function encode(value) {
  if (typeof value === "number" && !Number.isFinite(value)) {
    return {__float__: Number.isNaN(value) ? "nan" : (value > 0 ? "inf" : "-inf")};
  }
  if (value instanceof ArrayBuffer) return {__bytes__: bytesToBase64(new Uint8Array(value))};
  if (ArrayBuffer.isView(value)) {
    return {__bytes__: bytesToBase64(new Uint8Array(value.buffer, value.byteOffset, value.byteLength))};
  }
  if (Array.isArray(value)) return value.map(encode);
  if (value && typeof value === "object") {
    const out = {};
    for (const [k, v] of Object.entries(value)) out[k] = encode(v);
    return out;
  }
  return value === undefined ? null : value;
}

function revive(_key, value) {
  if (value && typeof value === "object" && !Array.isArray(value)) {
    const keys = Object.keys(value);
    if (keys.length === 1 && keys[0] === "__bytes__") return base64ToBytes(value.__bytes__);
    if (keys.length === 1 && keys[0] === "__float__") {
      return {inf: Infinity, "-inf": -Infinity, nan: NaN}[value.__float__];
    }
  }
  return value;
}

// ---- errors --------------------------------------------------------------------------------

/* Pyodide 0.17 raises a JS Error whose message is the whole Python traceback; the page shows
 * its last line ("ValueError: ..."), and keeps the rest for a details view. */
function describe(error) {
  const text = String((error && error.message) || error);
  const lines = text.split("\n").map((line) => line.trim()).filter(Boolean);
  return {error: lines.length ? lines[lines.length - 1] : "unknown error", traceback: text};
}

// ---- boot ----------------------------------------------------------------------------------

async function wheelUrl() {
  let response;
  try {
    response = await fetch(new URL("manifest.json", SITE).href);
  } catch (error) {
    throw new Error(`could not fetch manifest.json (${error.message})`);
  }
  if (!response.ok) throw new Error(`could not fetch manifest.json (HTTP ${response.status})`);
  const manifest = await response.json();
  const wheels = Object.keys(manifest.files).filter(
      (path) => /^wheels\/nlpcore-[^/]+-py3-none-any\.whl$/.test(path));
  if (wheels.length !== 1) {
    throw new Error(`manifest.json lists ${wheels.length} nlpcore wheels, expected exactly 1`);
  }
  return new URL(wheels[0], SITE).href;
}

async function boot() {
  progress("runtime", "loading the Python runtime (Pyodide 0.17)");
  try {
    self.importScripts(INDEX_URL + "pyodide.js");
  } catch (error) {
    throw new Error(`could not load vendor/pyodide/pyodide.js (${error.message})`);
  }
  const pyodide = await self.loadPyodide({indexURL: INDEX_URL});

  progress("numpy", "loading NumPy and micropip");
  const failures = [];
  await pyodide.loadPackage(["numpy", "micropip"], (msg) => progress("numpy", msg),
                            (msg) => failures.push(msg));
  try {
    pyodide.runPython("import numpy, micropip");
  } catch (error) {
    throw new Error(`NumPy or micropip did not load: ${failures.join("; ") || describe(error).error}`);
  }

  progress("nlpcore", "installing the nlpcore wheel");
  const url = await wheelUrl();
  const micropip = pyodide.runPython("import micropip\nmicropip");
  try {
    await micropip.install(url);
  } catch (error) {
    throw new Error(`could not install ${url.split("/").pop()}: ${describe(error).error}`);
  }
  web = pyodide.runPython("import nlpcore.web\nnlpcore.web");
  const versions = JSON.parse(pyodide.runPython(
      "import json, sys, numpy, nlpcore\n" +
      "json.dumps({'python': sys.version.split()[0], 'numpy': numpy.__version__," +
      " 'nlpcore': nlpcore.__version__})"));
  return {pyodide: pyodide.version, ...versions};
}

function answer(message) {
  const {id, name, payload} = message;
  if (bootError) {
    self.postMessage({id, error: `Python is unavailable: ${bootError}`});
    return;
  }
  if (ROLE === "judge" && !JUDGE_CALLS.has(name)) {
    self.postMessage({id, error: `ValueError: the judge worker answers only ${[...JUDGE_CALLS].join(", ")}, not ${name}`});
    return;
  }
  try {
    const text = web.call_json(name, JSON.stringify(encode(payload === undefined ? null : payload)));
    self.postMessage({id, result: JSON.parse(text, revive)});
  } catch (error) {
    self.postMessage({id, ...describe(error)});
  }
}

self.onmessage = (event) => {
  if (web || bootError) answer(event.data);
  else queue.push(event.data);
};

boot().then((info) => {
  progress("ready", `Python ${info.python}, NumPy ${info.numpy}, nlpcore ${info.nlpcore}`);
  self.postMessage({type: "ready", info});
}, (error) => {
  bootError = `${STAGE_TASKS[stage]} failed: ${describe(error).error}`;
  progress("error", bootError);
  self.postMessage({type: "boot-error", error: bootError});
}).then(() => {
  while (queue.length) answer(queue.shift());
});
