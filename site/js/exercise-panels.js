/* The exercise page's static parts: the list of exercises, a step's code panels (the kernel,
 * the mutants, a file to download) and the checks that run only on the learner's own machine. */
import {el} from "./dom.js";

const $ = (id) => document.getElementById(id);

export function renderExerciseList(all, current) {
  const nav = $("exercise-list");
  nav.replaceChildren();
  for (const ex of all) {
    const a = el("a", {href: `exercise.html?id=${encodeURIComponent(ex.id)}`, text: ex.title});
    if (current && ex.id === current.id) a.setAttribute("aria-current", "page");
    nav.append(a);
  }
}

export function renderPanels(panels, files) {
  const host = $("panels");
  host.replaceChildren();
  for (const panel of panels || []) {
    const details = el("details", {class: "code-panel", open: ""},
                       el("summary", {text: panel.title}));
    if (panel.code) {
      details.append(el("pre", {class: "code"}, el("code", {text: panel.code})));
      if (panel.download && files[panel.download]) {
        details.append(el("p", {class: "small"},
                          el("a", {href: panel.download, download: "", text: "Download this file"})));
      }
    } else {
      details.append(el("p", {class: "notice", text: `Not available: ${panel.missing || "missing"}.`}));
    }
    host.append(details);
  }
}

export function showLocalChecks(step) {
  const local = step.checks.filter((c) => c.runner === "local");
  $("local").hidden = local.length === 0;
  const list = $("local-checks");
  list.replaceChildren();
  for (const c of local) {
    list.append(el("li", {class: "local-check", "data-local-check": c.id},
                   el("strong", {text: c.title}), " — not run here: ", c.explain, ".",
                   el("pre", {}, el("code", {text: c.command}))));
  }
}
