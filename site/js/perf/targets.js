/* The performance page's "Targets at a glance": every target of every record, met or missed,
 * and for each miss what limits it (the record's own words). */
import {$, fmt, row} from "./format.js";

/* A record's targets as [{name, goal, measured, met, limited_by}]. */
function targetsOf(record) {
  const t = record.targets;
  if (Array.isArray(t)) return t;
  if (t && typeof t === "object") {  // the Triton record: {name: bool}
    return Object.entries(t).map(([name, met]) => ({
      name: name.replaceAll("_", " "), met: Boolean(met), measured: met ? "yes" : "no", goal: "yes",
      limited_by: met ? "" : "see the Triton section"}));
  }
  return [];
}

/* `loaded`: [{section, result}] with section = {label, path} and result = {data} | {missing} | {error}. */
export function showTargets(loaded) {
  const body = $("targets-body");
  body.textContent = "";
  const misses = [];
  for (const {section, result} of loaded) {
    const label = section.label;
    if (!result.data) {
      row(body, [label, result.missing ? "not yet recorded" : result.error, "", "", ""], {status: "not-measured"});
      misses.push({label, status: "not-measured", t: {name: "no record", measured: null, goal: "a recorded run",
        limited_by: result.missing ? `${section.path} is not in this build` : result.error}});
      continue;
    }
    for (const t of targetsOf(result.data)) {
      const status = t.met === true ? "met" : (t.met === false ? "missed" : "not-measured");
      const verdict = {met: "met", missed: "MISSED", "not-measured": "not measured"}[status];
      const tr = row(body, [label, t.name, t.goal, fmt(t.measured), verdict], {status});
      tr.className = status;
      if (status !== "met") misses.push({label, t, status});
    }
  }
  const list = $("misses-list");
  list.textContent = "";
  for (const {label, t, status} of misses) {
    const li = document.createElement("li");
    const head = document.createElement("strong");
    head.textContent = `${label}: ${t.name} — ${status === "missed" ? "missed" : "not measured"}`;
    li.appendChild(head);
    li.appendChild(document.createTextNode(
        ` (measured ${fmt(t.measured)}, goal ${t.goal}). ${t.limited_by ? "Limited by: " + t.limited_by : ""}`));
    list.appendChild(li);
  }
  $("misses").hidden = misses.length === 0;
}
