// DeepSpeed ZeRO stage 3: parameters gathered per module by hooks, gradients reduce-scattered as
// backward produces them (overlap_comm is on by default at stage 3).
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "deepspeed-zero3", "DeepSpeed ZeRO-3: parameters gathered per module, gradients reduce-scattered during backward",
    FrameworkProfile{
        .attention = "standard",
        .overlap_grad_reduce = true,
        .bucket_parameters = 5e8,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .sources = {"overlap_grad_reduce, bucket: deepspeed/runtime/zero/config.py (overlap_comm defaults to "
                    "stage == 3; "
                    "reduce_bucket_size 5e8 elements; stage3_prefetch_bucket_size 5e7 elements)",
                    "attention: the Megatron layers it ran (Narayanan et al. 2021, Table 2)"}});

} // namespace
} // namespace stepsim
