// Megatron-Core (Megatron-LM 0.5 and later) with Transformer Engine: fused attention, and the
// distributed data-parallel wrapper's buckets, reduced during backward when --overlap-grad-reduce
// is given (off by default).
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "megatron-core", "Megatron-Core with Transformer Engine: fused attention, bucketed DDP",
    FrameworkProfile{
        .attention = "flash",
        .overlap_grad_reduce = false,
        .bucket_parameters = 40e6,
        .bucket_parameters_per_rank = 1e6,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .sources = {"overlap_grad_reduce, bucket: megatron/core/distributed/distributed_data_parallel_config.py "
                    "(overlap_grad_reduce False; bucket_size None = max(40000000, 1000000 * dp_size) parameters)",
                    "attention: megatron/core/transformer/custom_layers/transformer_engine.py (TEDotProductAttention: "
                    "flash or cuDNN fused attention)"}});

} // namespace
} // namespace stepsim
