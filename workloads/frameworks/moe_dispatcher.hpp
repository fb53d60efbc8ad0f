// Megatron-Core's dropless alltoall token dispatcher, which stops the host in every MoE layer's
// forward (FrameworkProfile::moe_dispatch_synchronizes_host): the source the profiles built on
// Megatron-Core (megatron-core, nemo) cite for it.
#pragma once

namespace stepsim::frameworks {

inline constexpr const char* kMoeDispatchSynchronizesHostSource =
    "moe_dispatch_synchronizes_host: megatron/core/transformer/moe/token_dispatcher.py "
    "(MoEAlltoAllTokenDispatcher.preprocess: without a capacity factor the token counts per expert "
    "are moved to the CPU for the all-to-all's input_splits and output_splits, cuda_sync_point "
    "'before_ep_alltoall' with expert or expert-tensor parallelism, 'before_finish' without; "
    "_maybe_dtoh_and_synchronize waits on that copy's event in dispatch_all_to_all or "
    "dispatch_postprocess; backward reuses the splits, no wait), --moe-token-dispatcher-type "
    "alltoall, NVIDIA/Megatron-LM commit 0014f13";

} // namespace stepsim::frameworks
