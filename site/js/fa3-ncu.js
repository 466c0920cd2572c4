/* The Nsight Compute record of the FlashAttention-3 forward beside cuDNN's (bench/fa3_ncu.py writes
 * bench/results/fa3_ncu.json): its path, the counters the pages quote, and its kernel labels.
 * Episode 5 (js/fa3-episode.js) and the performance page (js/perf/triton.js) read it through this. */

export const NCU_RECORD = "bench/results/fa3_ncu.json";
export const NCU_METRICS = {
  time: "gpu__time_duration.sum",
  tensor: "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
  xu: "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
  issue: "smsp__issue_active.avg.pct_of_peak_sustained_active",
  barrier: "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
};

/* fa3_ncu.py's label of a shape ("d=64 N=1024 causal"), and the shape back from a kernel's label. */
export const ncuLabel = (s) => `d=${s.d} N=${s.n}${s.causal ? " causal" : ""}`;
export function ncuShape(label) {
  const m = /d=(\d+) N=(\d+)( causal)?/.exec(label);
  return { d: Number(m[1]), n: Number(m[2]), causal: Boolean(m[3]) };
}
