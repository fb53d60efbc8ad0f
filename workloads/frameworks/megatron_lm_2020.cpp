// Megatron-LM as the 2020 README's scaling runs used it (Shoeybi et al. 2019, NVIDIA/Megatron-LM
// v2.x): local DDP that all-reduces every gradient after backward, fused scale-mask-softmax.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "megatron-lm-2020", "Megatron-LM v2 (2020 README runs): gradients all-reduced after backward, unfused attention",
    FrameworkProfile{
        .attention = "standard",
        .overlap_grad_reduce = false,
        .bucket_parameters = 0, // one flat buffer of all gradients
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .sources = {"overlap_grad_reduce, bucket: megatron/model/distributed.py (DistributedDataParallel with "
                    "--DDP-impl local: allreduce_gradients() over one contiguous buffer, called by train_step after "
                    "backward), Megatron-LM v2.x",
                    "attention: megatron/model/fused_softmax.py (FusedScaleMaskSoftmax; scores materialised)"}});

} // namespace
} // namespace stepsim
