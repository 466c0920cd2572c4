/* The Triton benchmark's backends, named and coloured once for every chart that shows them
 * (performance.html's Triton section and the Triton exercise's results plot), so a backend
 * has one colour everywhere. Keys are the backend names in bench/results/triton_h200.json. */

export const TRITON_BACKENDS = [
  {key: "triton", label: "this lab's Triton", color: "#2456c7"},
  {key: "flash", label: "SDPA flash", color: "#17794a"},
  {key: "cudnn", label: "SDPA cuDNN", color: "#8a5a00"},
  {key: "efficient", label: "SDPA efficient", color: "#b3261e"},
];

// Kernels of this lab that the performance page shows beside them but the Triton exercise does
// not: FlashAttention-3's forward (Episode 5). Its "bwd" entry in the record is flash_triton's
// backward run on its saved output, so it is charted for the forward only.
export const OTHER_BACKENDS = [
  {key: "fa3", label: "this lab's FlashAttention-3 (Gluon)", color: "#6b3fa0", forwardOnly: true},
];

const UNKNOWN = "#5b6475";

/* {label, color} of a backend key; an unknown key keeps its name and gets a neutral grey. */
export function tritonBackend(key) {
  return TRITON_BACKENDS.find((b) => b.key === key) || OTHER_BACKENDS.find((b) => b.key === key) ||
      {key, label: `SDPA ${key}`, color: UNKNOWN};
}
