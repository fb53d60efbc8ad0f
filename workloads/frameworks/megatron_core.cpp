// Megatron-Core (Megatron-LM 0.5 and later) with Transformer Engine: fused attention, and the
// distributed data-parallel wrapper's buckets, reduced during backward when --overlap-grad-reduce
// is given (off by default).
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

FrameworkProfile megatron_core()
{
  FrameworkProfile p;
  p.attention                  = "flash";
  p.overlap_grad_reduce        = false;
  p.bucket_parameters          = 40e6;
  p.bucket_parameters_per_rank = 1e6;
  p.context_bytes              = frameworks::kPyTorchCudaContextBytes;
  p.sources = {"overlap_grad_reduce, bucket: megatron/core/distributed/distributed_data_parallel_config.py "
               "(overlap_grad_reduce False; bucket_size None = max(40000000, 1000000 * dp_size) parameters)",
               "attention: megatron/core/transformer/custom_layers/transformer_engine.py (TEDotProductAttention: "
               "flash or cuDNN fused attention)"};
  return p;
}

const bool registered = FrameworkRegistry::add(
    "megatron-core", "Megatron-Core with Transformer Engine: fused attention, bucketed DDP", megatron_core());

} // namespace
} // namespace stepsim
