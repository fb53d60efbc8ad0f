// NeMo runs Megatron-Core underneath (nemo/collections/nlp/models/language_modeling/
// megatron_gpt_model.py builds the model with megatron.core); its recipes turn on the gradient
// overlap that Megatron-Core leaves off.
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"
#include "workloads/frameworks/grouped_linear.hpp"
#include "workloads/frameworks/moe_dispatcher.hpp"

namespace stepsim {
namespace {

const bool registered = FrameworkRegistry::add(
    "nemo", "NVIDIA NeMo on Megatron-Core: fused attention, gradients reduced during backward",
    FrameworkProfile{
        .attention = "flash",
        .overlap_grad_reduce = true,
        .bucket_parameters = 40e6,
        .bucket_parameters_per_rank = 1e6,
        .context_bytes = frameworks::kPyTorchCudaContextBytes,
        .pipeline_transfer_synchronizes_host = true,
        // Megatron's bf16 runs accumulate and reduce fp32 gradients (main_grad buffers).
        .fp32_gradients_for = {"bf16"},
        .attention_kernel = "cudnn",
        .tensor_backward_overlap = true,
        .expert_gemm_per_expert = true,
        .moe_dispatch_synchronizes_host = true,
        .sources = {frameworks::kExpertGemmPerExpertSource, frameworks::kMoeDispatchSynchronizesHostSource,
                    "pipeline_transfer_synchronizes_host: megatron/core/pipeline_parallel/p2p_communication.py "
                    "(_communicate: torch.cuda.synchronize() after torch.distributed.batch_isend_irecv when "
                    "config.batch_p2p_comm and config.batch_p2p_sync, both True by default in "
                    "megatron/core/model_parallel_config.py), Megatron-Core 0.8",
                    "tensor_backward_overlap: megatron/core/tensor_parallel/layers.py "
                    "(LinearWithGradAccumulationAndAsyncCommunication.backward: the sequence-parallel input "
                    "all-gather and the dgrad reduce-scatter issued with async_op=True before the dgrad and wgrad "
                    "GEMMs, waited for after them; without sequence parallelism the dgrad all-reduce, "
                    "--async-tensor-model-parallel-allreduce being on by default), the Megatron-Core NeMo runs",
                    "attention_kernel: Transformer Engine under NeMo: cuDNN fused attention on Hopper (NeMo docs, "
                    "memory_optimizations.rst, 'Transformer Engine prefers cuDNN flash attention on Hopper+ "
                    "architectures, and Tri Dao flash attention on Ampere')",
                    "fp32_gradients_for: megatron/training/arguments.py of the Megatron-Core it runs "
                    "(validate_args: 'bfloat16 requires gradient accumulation and all-reduce to be done in fp32', "
                    "accumulate_allreduce_grads_in_fp32 = True for bf16)",
                    "overlap_grad_reduce: NeMo's megatron_gpt_config.yaml (overlap_grad_sync True with the distributed "
                    "optimizer)",
                    "bucket: megatron/core/distributed/distributed_data_parallel_config.py (bucket_size default)",
                    "attention: Transformer Engine fused attention"}});

} // namespace
} // namespace stepsim
