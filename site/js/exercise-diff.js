/* After passing: the learner's solution beside the reference, line by line.
 *
 * lineDiff(a, b) aligns two texts by their longest common subsequence of lines (a plain dynamic
 * programme: exercise code is a few hundred lines at most) and returns rows
 * {kind: "same" | "changed" | "removed" | "added", left, right, leftNo, rightNo}; a run of
 * removed lines followed by added ones is paired up as "changed". renderSideBySide draws them
 * as a two-column table (yours | reference); lines differing only in trailing spaces are equal.
 */
import {el} from "./dom.js";

const MAX_CELLS = 4e6;  // lines(a) * lines(b) above which the texts are shown unaligned

export function lineDiff(a, b) {
  const left = a.replace(/\s+$/, "").split("\n");
  const right = b.replace(/\s+$/, "").split("\n");
  const key = (line) => line.replace(/\s+$/, "");
  const n = left.length;
  const m = right.length;
  if (n * m > MAX_CELLS) {
    return Array.from({length: Math.max(n, m)}, (_, i) => ({kind: "changed", left: left[i] ?? null, right: right[i] ?? null,
                                                           leftNo: i < n ? i + 1 : null, rightNo: i < m ? i + 1 : null}));
  }
  // lcs[i][j]: length of the longest common subsequence of left[i:] and right[j:]
  const lcs = Array.from({length: n + 1}, () => new Int32Array(m + 1));
  for (let i = n - 1; i >= 0; i -= 1) {
    for (let j = m - 1; j >= 0; j -= 1) {
      lcs[i][j] = key(left[i]) === key(right[j]) ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const raw = [];
  let i = 0;
  let j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && key(left[i]) === key(right[j])) {
      raw.push({kind: "same", left: left[i], right: right[j], leftNo: i + 1, rightNo: j + 1});
      i += 1;
      j += 1;
    } else if (j < m && (i === n || lcs[i][j + 1] >= lcs[i + 1][j])) {
      raw.push({kind: "added", left: null, right: right[j], leftNo: null, rightNo: j + 1});
      j += 1;
    } else {
      raw.push({kind: "removed", left: left[i], right: null, leftNo: i + 1, rightNo: null});
      i += 1;
    }
  }
  // Pair each run of removed lines with the run of added lines next to it.
  const rows = [];
  for (let k = 0; k < raw.length;) {
    if (raw[k].kind === "same") {
      rows.push(raw[k]);
      k += 1;
      continue;
    }
    const removed = [];
    const added = [];
    while (k < raw.length && raw[k].kind !== "same") {
      (raw[k].kind === "removed" ? removed : added).push(raw[k]);
      k += 1;
    }
    for (let p = 0; p < Math.max(removed.length, added.length); p += 1) {
      const r = removed[p];
      const a = added[p];
      rows.push({kind: r && a ? "changed" : r ? "removed" : "added", left: r ? r.left : null, right: a ? a.right : null,
                 leftNo: r ? r.leftNo : null, rightNo: a ? a.rightNo : null});
    }
  }
  return rows;
}

export function renderSideBySide(mine, reference) {
  const rows = lineDiff(mine, reference);
  const differ = rows.filter((r) => r.kind !== "same").length;
  const table = el("table", {class: "side-by-side", "data-testid": "diff-table"});
  table.append(el("thead", {}, el("tr", {}, el("th", {scope: "col", colspan: "2", text: "Your solution"}),
                                   el("th", {scope: "col", colspan: "2", text: "The reference solution"}))));
  const body = el("tbody");
  for (const row of rows) {
    body.append(el("tr", {class: `diff-${row.kind}`, "data-kind": row.kind},
                   el("td", {class: "no", text: row.leftNo === null ? "" : String(row.leftNo)}),
                   el("td", {class: "code mine"}, el("code", {text: row.left ?? ""})),
                   el("td", {class: "no", text: row.rightNo === null ? "" : String(row.rightNo)}),
                   el("td", {class: "code reference"}, el("code", {text: row.right ?? ""}))));
  }
  table.append(body);
  return {node: el("div", {class: "table-scroll"}, table), differ};
}
