// Megatron-LM as SC'21 ran it (Narayanan et al. 2021; examples/sc21 at 6985e58): the 2020
// behaviours, with the interleaved schedule and the scatter/gather optimisation between stages
// that the scenario states itself.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "megatron-lm-2021", "Megatron-LM as in SC'21: gradients all-reduced after backward, unfused attention",
    FrameworkProfile{
        .attention = "standard",
        .overlap_grad_reduce = false,
        .bucket_parameters = 0,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .pipeline_transfer_synchronizes_host = true,
        // Megatron's bf16 runs accumulate and reduce fp32 gradients (main_grad buffers).
        .fp32_gradients_for = {"bf16"},
        .sources = {"pipeline_transfer_synchronizes_host: megatron/p2p_communication.py (_communicate: 'To protect "
                    "against race condition when using batch_isend_irecv()', torch.cuda.synchronize() after every "
                    "batched send and receive)",
                    "fp32_gradients_for: megatron/arguments.py "
                    "(validate_args: 'bfloat16 requires gradient accumulation and all-reduce to be done in fp32', "
                    "accumulate_allreduce_grads_in_fp32 = True for bf16)",
                    "overlap_grad_reduce, bucket: megatron/model/distributed.py (--DDP-impl local, "
                    "allreduce_gradients() after backward), examples/sc21/CONFIG.sh at 6985e58",
                    "attention: megatron/model/fused_softmax.py (FusedScaleMaskSoftmax)"}});

} // namespace
} // namespace stepsim
