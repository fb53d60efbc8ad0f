// Megatron-Core's experts as Transformer Engine's GroupedLinear, one GEMM launch per expert
// (FrameworkProfile::expert_gemm_per_expert): the source the profiles built on Megatron-Core
// (megatron-core, nemo) cite for it.
#pragma once

namespace stepsim::frameworks {

inline constexpr const char* kExpertGemmPerExpertSource =
    "expert_gemm_per_expert: megatron/core/models/gpt/gpt_layer_specs.py (get_mlp_module_spec: "
    "--moe-grouped-gemm with Transformer Engine builds TEGroupedMLP unless "
    "--moe-use-legacy-grouped-gemm); transformer_engine/pytorch/module/grouped_linear.py "
    "(_GroupedLinear.forward and backward: general_grouped_gemm over m_splits, one cuBLAS GEMM "
    "per expert on the multi-stream workspaces), Megatron-Core 0.8 and later with Transformer "
    "Engine 1.9 and later";

} // namespace stepsim::frameworks
