// Read-only source viewer: source.html?path=src/nlpcore/kernels/flash_np.py
// Only files listed under src/ in the build's manifest.json are shown (so a bad path gives a
// stated reason instead of a 404), highlighted by the vendored CodeMirror 5 in read-only
// mode, or as a numbered <pre> when CodeMirror did not load.

const $ = (id) => document.getElementById(id);

function say(text) {
  const s = $("source-status");
  s.textContent = text;
  s.hidden = false;
}

function plainView(text) {
  const pre = document.createElement("pre");
  pre.className = "plain-source";
  const lines = text.split("\n");
  const width = String(lines.length).length;
  pre.textContent = lines.map((line, k) => `${String(k + 1).padStart(width)}  ${line}`).join("\n");
  return pre;
}

async function main() {
  const path = new URLSearchParams(window.location.search).get("path") || "";
  let files = {};
  try {
    const resp = await fetch("manifest.json", { cache: "no-cache" });
    if (resp.ok) files = (await resp.json()).files || {};
  } catch (err) {
    files = {};
  }
  const sources = Object.keys(files).filter((f) => f.startsWith("src/")).sort();
  $("source-list").replaceChildren(...sources.map((f) => {
    const li = document.createElement("li");
    const a = document.createElement("a");
    a.href = `source.html?path=${encodeURIComponent(f)}`;
    a.textContent = f.slice(4);
    if (f === path) a.setAttribute("aria-current", "page");
    li.append(a);
    return li;
  }));
  if (!sources.length) {
    say("This build has no manifest.json listing the source files, so nothing can be shown.");
    return;
  }
  if (!path) {
    say("Pick a file below.");
    return;
  }
  if (!sources.includes(path)) {
    say(`There is no source file "${path}" in this build; pick one of the files below.`);
    return;
  }
  $("source-title").textContent = path.slice(4);
  document.title = `${path.slice(4)} — FlashAttention lab`;
  const raw = $("raw-link");
  raw.href = path;
  raw.hidden = false;
  const resp = await fetch(path, { cache: "no-cache" });
  if (!resp.ok) {
    say(`Could not load ${path}: HTTP ${resp.status}.`);
    return;
  }
  const text = await resp.text();
  const view = $("source-view");
  const CodeMirror = window.CodeMirror;
  if (!CodeMirror) {
    say("The code highlighter (vendor/codemirror) did not load; showing plain text.");
    view.append(plainView(text));
    return;
  }
  const mode = path.endsWith(".py") ? "python" : path.endsWith(".wgsl") ? "text/x-csrc" : null;
  CodeMirror(view, { value: text, mode, readOnly: true, lineNumbers: true, viewportMargin: Infinity,
                     screenReaderLabel: `source of ${path}` });
  view.dataset.lines = String(text.split("\n").length);
}

function start() {
  main().catch((err) => say(`The source viewer failed: ${err.message}`));
}
if (document.readyState === "complete") start();
else window.addEventListener("load", start);
