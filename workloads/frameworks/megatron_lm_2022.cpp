// Megatron-LM 3.x as Korthikanti et al. 2022 ran it: sequence parallelism and selective
// recompute (which the scenario states), attention still unfused, gradients reduced after backward.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "megatron-lm-2022", "Megatron-LM 3 (Korthikanti 2022): sequence parallel and selective recompute, unfused "
    "attention",
    FrameworkProfile{
        .attention = "standard",
        .overlap_grad_reduce = false,
        .bucket_parameters = 0,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .pipeline_transfer_synchronizes_host = true,
        // Megatron's bf16 runs accumulate and reduce fp32 gradients (main_grad buffers).
        .fp32_gradients_for = {"bf16"},
        .tensor_backward_overlap = true,
        .sources = {"pipeline_transfer_synchronizes_host: megatron/p2p_communication.py (_communicate: 'To protect "
                    "against race condition when using batch_isend_irecv()', torch.cuda.synchronize() after every "
                    "batched send and receive)",
                    "tensor_backward_overlap: megatron/mpu/layers.py "
                    "(LinearWithGradAccumulationAndAsyncCommunication.backward: the sequence-parallel input "
                    "all-gather and the dgrad reduce-scatter issued with async_op=True before the dgrad and wgrad "
                    "GEMMs, waited for after them; without sequence parallelism the dgrad all-reduce, "
                    "--async-tensor-model-parallel-allreduce being on by default), Megatron-LM v3.0",
                    "fp32_gradients_for: megatron/arguments.py "
                    "(validate_args: 'bfloat16 requires gradient accumulation and all-reduce to be done in fp32', "
                    "accumulate_allreduce_grads_in_fp32 = True for bf16)",
                    "attention: megatron/model/transformer.py (CoreAttention with FusedScaleMaskSoftmax; "
                    "--recompute-granularity selective recomputes it), Megatron-LM v3.0",
                    "overlap_grad_reduce: megatron/model/distributed.py (allreduce_gradients() after backward)"}});

} // namespace
} // namespace stepsim
