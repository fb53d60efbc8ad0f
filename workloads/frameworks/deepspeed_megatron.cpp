// Megatron-DeepSpeed (MT-NLG, BLOOM): Megatron's layers under DeepSpeed's engine and pipeline, ZeRO
// stage 1 or 2 for the data-parallel part. DeepSpeed reduces gradients after backward unless
// overlap_comm is set, in buckets of reduce_bucket_size elements.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "deepspeed-megatron", "Megatron-DeepSpeed: DeepSpeed pipeline and ZeRO 1/2, gradients reduced after backward",
    FrameworkProfile{
        .attention = "standard",
        .overlap_grad_reduce = false,
        .bucket_parameters = 5e8,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .sources = {"overlap_grad_reduce, bucket: deepspeed/runtime/zero/config.py (overlap_comm defaults to "
                    "stage == 3; "
                    "reduce_bucket_size 5e8 elements)",
                    "attention: megatron/model/fused_softmax.py in Megatron-DeepSpeed (FusedScaleMaskSoftmax)"}});

} // namespace
} // namespace stepsim
