// DeepSpeed ZeRO stage 3: parameters gathered per module by hooks, gradients reduce-scattered as
// backward produces them (overlap_comm is on by default at stage 3).
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

FrameworkProfile deepspeed_zero3()
{
  FrameworkProfile p;
  p.attention           = "standard";
  p.overlap_grad_reduce = true;
  p.bucket_parameters   = 5e8;
  p.context_bytes       = frameworks::kPyTorchCudaContextBytes;
  p.sources = {"overlap_grad_reduce, bucket: deepspeed/runtime/zero/config.py (overlap_comm defaults to stage == 3; "
               "reduce_bucket_size 5e8 elements; stage3_prefetch_bucket_size 5e7 elements)",
               "attention: the Megatron layers it ran (Narayanan et al. 2021, Table 2)"};
  return p;
}

const bool registered = FrameworkRegistry::add(
    "deepspeed-zero3", "DeepSpeed ZeRO-3: parameters gathered per module, gradients reduce-scattered during backward",
    deepspeed_zero3());

} // namespace
} // namespace stepsim
