/* Performance page, section 8. Ring attention on two H200s.
 *
 * Draws bench/results/ring_2gpu.json; the record's shape is documented by the script in bench/ that writes it.
 */
import {$, fmt, bytes, seconds, row} from "./format.js";

function showRing(record) {
  const body = $("ring-body");
  body.textContent = "";
  for (const r of record.times || []) {
    const cp = "context_parallel_s" in r ? (r.context_parallel_ok ? seconds(r.context_parallel_s) : "wrong output")
      : (r.context_parallel_error || "–");
    row(body, [`${r.n.toLocaleString("en-US")}${r.causal ? ", causal" : ""}`, seconds(r.ring_s), seconds(r.chunked_s),
               seconds(r.one_device_kernel_s), seconds(r.one_device_sdpa_s), cp, `${fmt(r.speedup_vs_one_device_kernel)}×`]);
  }
  const env = record.env || {};
  const l = record.longest || {};
  $("ring-notes").textContent =
      `${(env.gpus || []).join("; ")}; NCCL ${env.nccl || "?"}, torch ${env.torch || "?"}; recorded ${env.date_utc || "?"} with: ` +
      `${env.command || "?"}. Checks against fp64 and SDPA: ${record.all_checks_pass ? "all passed" : "NOT all passed"}. ` +
      (l.one_gpu_n ? `Longest causal sequence under ${bytes(l.cap_bytes)} per GPU: one GPU ${l.one_gpu_n.toLocaleString("en-US")}, ` +
        `${l.world} GPUs ${l.ring_n.toLocaleString("en-US")} tokens (${fmt(l.ratio)}×).` : "");
}

export default {key: "ring", path: "bench/results/ring_2gpu.json", label: "ring, two H200s", section: "ring", show: showRing};
