// The H200 record of bench/io_h200.py (bench/results/io_h200.json, copied into the site by the
// build), read for pages that set the IO model beside hardware counters. Nothing here measures:
// it fetches the record and picks out the Figure 2 rows. A missing record is reported, not hidden.

const RECORD = "bench/results/io_h200.json";

/* {record, figure2: {impl: row}} or {missing: true} / {error: message}. */
export async function loadH200(base = document.baseURI) {
  let response;
  try {
    response = await fetch(new URL(RECORD, base), {cache: "no-cache"});
  } catch (error) {
    return {error: `${RECORD} could not be read: ${error.message}`};
  }
  if (response.status === 404) return {missing: true};
  if (!response.ok) return {error: `HTTP ${response.status} for ${RECORD}`};
  const record = await response.json();
  const figure2 = {};
  for (const row of record.rows || []) if (row.setting === "figure2") figure2[row.impl] = row;
  if (!figure2.baseline || !figure2.triton) return {error: `${RECORD} has no Figure 2 rows`};
  return {record, figure2};
}

/* The model's bytes for a row: the baseline's passes, or the flash count with Theorem 2's tiles. */
export function modelBytes(row) {
  const m = row.model_bytes || {};
  return m.baseline_passes !== undefined ? m.baseline_passes : m.flash_sram;
}

export const gb = (bytes) => (Number.isFinite(bytes) ? (bytes / 1e9).toFixed(bytes < 1e10 ? 2 : 1) : "–");
