/* Number and unit formatting shared by the performance page's sections and "time my GPU".
 *
 * Every figure a learner reads goes through one of these, so the page never shows "1.34e+3 ms"
 * or "0.000808 TFLOP/s": times pick s / ms / µs, rates pick TFLOP/s / GFLOP/s / MFLOP/s, bytes
 * pick GB / MB / kB, each with three significant digits.
 */

export const $ = (id) => document.getElementById(id);

/* A plain number with `digits` significant digits; whole numbers from 1000 to 10^6 rounded;
 * exponent notation only outside [10^-3, 10^6) (for unitless values such as max |Δ|). */
export function fmt(x, digits = 3) {
  if (x === null || x === undefined || Number.isNaN(x)) return "—";
  if (typeof x !== "number") return String(x);
  if (x === 0) return "0";
  const a = Math.abs(x);
  if (a >= 1000 && a < 1e6) return String(Math.round(x));
  if (a >= 1e6 || a < 1e-3) return x.toExponential(2);
  return x.toPrecision(digits);
}

/* The largest unit in which `x` (in base units) is at least 1, e.g. scaled(1340, MS_UNITS). */
function scaled(x, units) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "—";
  for (const [unit, size] of units) if (Math.abs(x) >= size) return `${fmt(x / size)} ${unit}`;
  const [unit, size] = units[units.length - 1];
  return `${fmt(x / size)} ${unit}`;
}

export const bytes = (x) => scaled(x, [["GB", 1e9], ["MB", 1e6], ["kB", 1e3], ["B", 1]]);

export function mib(x) {
  return x >= 2 ** 30 ? `${fmt(x / 2 ** 30)} GiB` : `${fmt(x / 2 ** 20)} MiB`;
}

/* A duration given in seconds: "1.34 s", "808 ms", "12.5 µs". */
export const seconds = (x) => scaled(x, [["s", 1], ["ms", 1e-3], ["µs", 1e-6], ["ns", 1e-9]]);

/* A duration given in milliseconds. */
export const milliseconds = (ms) => seconds(ms === null || ms === undefined ? ms : ms / 1e3);

/* A rate given in FLOP/s: "2.41 TFLOP/s", "808 MFLOP/s". */
export const flopRate = (x) => scaled(x, [["TFLOP/s", 1e12], ["GFLOP/s", 1e9], ["MFLOP/s", 1e6], ["kFLOP/s", 1e3]]);

/* A speed-up or ratio: "3.30×". */
export const times = (x) => (x === null || x === undefined || !Number.isFinite(x) ? "—" : `${x.toFixed(2)}×`);

export function row(tbody, cells, attrs = {}) {
  const tr = document.createElement("tr");
  for (const [key, value] of Object.entries(attrs)) tr.dataset[key] = value;
  for (const text of cells) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.appendChild(td);
  }
  tbody.appendChild(tr);
  return tr;
}

export function machineLine(record) {
  const m = record.machine || {};
  const v = m.versions || {};
  const versions = Object.entries(v).filter(([, x]) => x).map(([k, x]) => `${k} ${x}`).join(", ");
  const memory = m.memory_bytes ? `, ${fmt(m.memory_bytes / 2 ** 30)} GiB` : "";
  return `Recorded ${record.recorded_at || "?"} on ${m.cpu || "?"} (${m.cores || "?"} cores${memory}); ${versions}.`;
}
