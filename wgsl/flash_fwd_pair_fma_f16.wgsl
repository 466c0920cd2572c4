// flash_fwd_pair_fma_f16.wgsl — flash_fwd_pair_f16.wgsl with flash_fwd_pair_fma.wgsl's fma()
// chains (a benchmark variant beside the f16 tier: bench/webgpu_tiers.py --tier-variants,
// nlpcore.kernels.flash_wgsl_variants "pair-fma-f16"). Needs `shader-f16` and `subgroups`.
//
//   O = softmax(scale · Q Kᵀ, masked) V        lse = log Σ_j exp(scale · q·k_j)   (per query row)
//
// Nothing here is new: float16 q, k, v and o, widened to float32 once as they are staged
// (flash_fwd_pair_f16.wgsl's bindings and io), pair's main loop, and pair-fma's inner products.
// Does the float16 tier keep what the fma() chains gain in float32? Its mirror:
// flash_wgsl_variants.forward(..., variant="pair-fma-f16"), pair-f16's rounding points.

enable f16;
enable subgroups;

// #include flash_fwd.wgsl sentinel

// vec4 slots of a staged key or value row per 64 head dims (flash_fwd.wgsl's layout).
const CHUNK4: u32 = 16u;

// vec4 slots of q and of o one invocation holds per row: 32 floats, for each of its two rows.
const HALF4: u32 = 8u;

// #include flash_fwd.wgsl sizes

// #include flash_fwd.wgsl params

@group(0) @binding(0) var<uniform> params: Params;
// #include flash_fwd_pair_f16.wgsl f16 bindings

var<workgroup> k_tile: array<vec4<f32>, BC * KS * CHUNK4>;   // float32: widened once, when staged
var<workgroup> v_tile: array<vec4<f32>, BC * KS * CHUNK4>;

// #include flash_fwd_pair.wgsl pair main

// #include flash_fwd_pair.wgsl pair common

// #include flash_fwd_pair_fma.wgsl fma dot

// #include flash_fwd_pair.wgsl masked

// #include flash_fwd.wgsl basics

// #include flash_fwd_pair_f16.wgsl f16 io

// #include flash_fwd.wgsl allowed
