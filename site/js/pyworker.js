/* Pyodide in a classic Web Worker: the page never freezes while Python runs.
 *
 * Boot (each stage is reported to the page as {type: "progress", stage, message}):
 *   runtime  - importScripts(vendor/pyodide/pyodide.js) and loadPyodide({indexURL}), with the
 *              WebAssembly module the page compiled and the precompiled bytecode (see below)
 *   numpy    - pyodide.loadPackage(["numpy"]), then an import to verify it
 *              (loadPackage in Pyodide 0.17 reports failures but does not throw)
 *   nlpcore  - the wheel listed in manifest.json unpacked into site-packages (a zip of pure-Python
 *              files: micropip, whose import alone costs a few hundred ms here, is not needed),
 *              then import nlpcore.web
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
 * that judge (JUDGE_CALLS), none of which runs learner code, so its Python never sees any. It is
 * ready with the graders imported (those of the page's exercise, pyworker.js?role=judge&exercise=
 * <id>, or every exercise's), so the first grade costs only grading.
 */
"use strict";

const SITE = new URL("../", self.location.href);  // js/pyworker.js -> site root
const INDEX_URL = new URL("vendor/pyodide/", SITE).href;

const ROLE = new URLSearchParams(self.location.search).get("role") || "learner";
const EXERCISE = new URLSearchParams(self.location.search).get("exercise");  // the judge's
const JUDGE_CALLS = new Set(["exercises.judge", "exercises.conclude", "exercises.verify"]);

let web = null;          // PyProxy of the nlpcore.web module once booted
let bootError = null;    // a stated reason when booting failed
const queue = [];        // requests that arrived before boot finished

const STAGE_TASKS = {
  runtime: "loading the Pyodide runtime from vendor/pyodide/",
  numpy: "loading NumPy from vendor/pyodide/",
  nlpcore: "installing the nlpcore wheel from wheels/",
};
let stage = "runtime";   // the boot stage under way, named in a boot error
const stageStarts = {};  // stage -> when it began (ms since 1970): the ready info's `boot`

function progress(next, message) {
  if (next in STAGE_TASKS) stage = next;
  if (!(next in stageStarts)) stageStarts[next] = performance.timeOrigin + performance.now();
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

// ---- Pyodide's WebAssembly, compiled once per page -------------------------------------------

// The page (js/runtime.js) compiles vendor/pyodide/pyodide.asm.wasm once and posts the
// WebAssembly.Module to each worker it starts ({type: "wasm", module}, or module null when it
// could not). Instantiating a compiled module skips this worker's 11 MB download and compile, and
// the functions V8 compiles lazily while one worker boots are compiled already for the next.
let receiveWasm;
const pageWasm = new Promise((resolve) => { receiveWasm = resolve; });
let wasmSource = null;   // "page" or "fetched": told to the page in the ready info
let wasmFailed;          // rejects when instantiating fails (loadPyodide would wait forever)
const wasmFailure = new Promise((_resolve, reject) => { wasmFailed = reject; });

/* Emscripten's Module.instantiateWasm hook: instantiates asynchronously, returns {} at once. */
let pycBuffer = null;

function instantiateWasm(imports, receiveInstance) {
  Promise.all([pageWasm, pycBundle]).then(async ([module, pyc]) => {
    pycBuffer = pyc;  // ready before receiveInstance lets Emscripten go on to preRun
    if (module) {
      receiveInstance(await WebAssembly.instantiate(module, imports), module);
      wasmSource = "page";
    } else {
      const fetched = await WebAssembly.instantiateStreaming(fetch(INDEX_URL + "pyodide.asm.wasm"), imports);
      receiveInstance(fetched.instance, fetched.module);
      wasmSource = "fetched";
    }
  }).catch((error) => wasmFailed(new Error(`could not instantiate pyodide.asm.wasm (${error.message})`)));
  return {};
}

// ---- precompiled bytecode ------------------------------------------------------------------

// pyc/bundle.bin (labtools/pyc_bundle.py): the standard library and NumPy modules a boot imports,
// and nlpcore's (beside the sources the wheel unpacks), compiled at build time as unchecked
// hash-based pycs, written into this worker's file system before Python starts; Pyodide would
// otherwise compile each from source (sys.dont_write_bytecode).
// Without the file (a build without CPython 3.8) Python compiles them as it always did.
const pycBundle = fetch(new URL("pyc/bundle.bin", SITE).href)
  .then((response) => (response.ok ? response.arrayBuffer() : null), () => null);
let pycWritten = 0;      // told to the page in the ready info, with whether Python takes them
let pycMagic = null;     // the bundle's magic number (hex), which must be this Python's

/* An Emscripten preRun callback: the bundle's files into the file system (Module.FS). */
function writePyc(Module, buffer) {
  if (!buffer || !Module.FS) return;
  const n = new DataView(buffer).getUint32(0, true);
  const header = JSON.parse(new TextDecoder().decode(new Uint8Array(buffer, 4, n)));
  let offset = 4 + n;
  pycMagic = Array.from(new Uint8Array(buffer, offset, 4), (b) => b.toString(16).padStart(2, "0")).join("");
  for (const [path, size] of header.files) {
    Module.FS.mkdirTree(path.slice(0, path.lastIndexOf("/")));
    Module.FS.writeFile(path, new Uint8Array(buffer, offset, size));
    offset += size;
    pycWritten += 1;
  }
}

// Workaround: Pyodide 0.17's loadPyodide() takes no Emscripten Module settings. It loads
// pyodide.asm.js, whose top-level `var _createPyodideModule = ...` assigns the factory that
// loadPyodide then calls with its Module; a setter on that global wraps the factory so that
// Module.instantiateWasm is ours. The ready info's `wasm` ("page") shows it took effect
// (tests/browser/test_exercise_speed.py pins it).
function hookWasm() {
  let factory;
  Object.defineProperty(self, "_createPyodideModule", {
    configurable: true,
    get: () => factory,
    set: (create) => {
      factory = (Module) => {
        Module.instantiateWasm = instantiateWasm;
        Module.preRun = [(module) => writePyc(module, pycBuffer)];
        return create(Module);
      };
    },
  });
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

/* The wheel (a zip of pure-Python files) extracted into site-packages. */
async function unpackWheel(pyodide, url) {
  const name = url.split("/").pop();
  let response;
  try {
    response = await fetch(url);
  } catch (error) {
    throw new Error(`could not fetch ${name} (${error.message})`);
  }
  if (!response.ok) throw new Error(`could not fetch ${name} (HTTP ${response.status})`);
  const path = `/tmp/${name}`;
  pyodide._module.FS.writeFile(path, new Uint8Array(await response.arrayBuffer()));
  const unpack = pyodide.runPython(
      "def unpack(path):\n" +
      "    import importlib, os, sysconfig, zipfile\n" +
      "    with zipfile.ZipFile(path) as wheel:\n" +
      "        wheel.extractall(sysconfig.get_paths()['purelib'])\n" +
      "    os.remove(path)\n" +
      "    importlib.invalidate_caches()\n" +
      "unpack");
  try {
    unpack(path);
  } catch (error) {
    throw new Error(`could not unpack ${name}: ${describe(error).error}`);
  } finally {
    unpack.destroy();
  }
}

async function boot() {
  progress("runtime", "loading the Python runtime (Pyodide 0.17)");
  try {
    self.importScripts(INDEX_URL + "pyodide.js");
  } catch (error) {
    throw new Error(`could not load vendor/pyodide/pyodide.js (${error.message})`);
  }
  hookWasm();
  const pyodide = await Promise.race([self.loadPyodide({indexURL: INDEX_URL}), wasmFailure]);

  progress("numpy", "loading NumPy");
  const failures = [];
  await pyodide.loadPackage(["numpy"], (msg) => progress("numpy", msg), (msg) => failures.push(msg));
  try {
    pyodide.runPython("import numpy");
  } catch (error) {
    throw new Error(`NumPy did not load: ${failures.join("; ") || describe(error).error}`);
  }

  progress("nlpcore", "installing the nlpcore wheel");
  await unpackWheel(pyodide, await wheelUrl());
  web = pyodide.runPython("import nlpcore.web\nnlpcore.web");
  // The judge is ready with its graders imported (the page's warm-up call does it for the
  // learner): the page's exercise's (pyworker.js?role=judge&exercise=<id>), or every one.
  if (ROLE === "judge") {
    try {
      if (EXERCISE) web.call_json("exercises.prepare", JSON.stringify({exercise: EXERCISE}));
      else web.call_json("exercises.catalog", "{}");
    } catch (error) {
      // an unknown exercise: the grade's own call says so
    }
  }
  const versions = JSON.parse(pyodide.runPython(
      "import json, sys, numpy, nlpcore\n" +
      "json.dumps({'python': sys.version.split()[0], 'numpy': numpy.__version__," +
      " 'nlpcore': nlpcore.__version__})"));
  const magic = pyodide.runPython("import importlib.util\nimportlib.util.MAGIC_NUMBER.hex()");
  return {pyodide: pyodide.version, ...versions, wasm: wasmSource,
          pyc: {files: pycWritten, usable: pycWritten > 0 && magic === pycMagic}};
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
  if (event.data && event.data.type === "wasm") receiveWasm(event.data.module || null);
  else if (web || bootError) answer(event.data);
  else queue.push(event.data);
};

boot().then((info) => {
  progress("ready", `Python ${info.python}, NumPy ${info.numpy}, nlpcore ${info.nlpcore}`);
  self.postMessage({type: "ready", info: {...info, boot: stageStarts}});
}, (error) => {
  bootError = `${STAGE_TASKS[stage]} failed: ${describe(error).error}`;
  progress("error", bootError);
  self.postMessage({type: "boot-error", error: bootError});
}).then(() => {
  while (queue.length) answer(queue.shift());
});
