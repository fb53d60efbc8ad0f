// Megatron-Core (Megatron-LM 0.5 and later) with Transformer Engine: fused attention, and the
// distributed data-parallel wrapper's buckets, reduced during backward when --overlap-grad-reduce
// is given (off by default).
#include "sim/core/framework.hpp"
#include "workloads/frameworks/context.hpp"
#include "workloads/frameworks/grouped_linear.hpp"
#include "workloads/frameworks/moe_dispatcher.hpp"

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
        .pipeline_transfer_synchronizes_host = true,
        // Megatron's bf16 runs accumulate and reduce fp32 gradients (main_grad buffers).
        .fp32_gradients_for = {"bf16"},
        // --tp-comm-overlap, as Megatron-Core's published runs set it (the README's benchmark table
        // names it): Transformer Engine's userbuffers overlap the sequence-parallel all-gathers
        // and reduce-scatters with the GEMMs that consume or produce them.
        .tensor_comm_overlap          = true,
        .tensor_overlap_reduce_chunks = 4,
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
                    "--async-tensor-model-parallel-allreduce being on by default), Megatron-Core 0.8",
                    "attention_kernel: transformer_engine/pytorch/attention (DotProductAttention picks cuDNN fused "
                    "attention on Hopper when both apply: NeMo docs, memory_optimizations.rst, 'Transformer Engine "
                    "prefers cuDNN flash attention on Hopper+ architectures, and Tri Dao flash attention on Ampere'; "
                    "a device without a cuDNN figure runs its common one)",
                    "fp32_gradients_for: megatron/training/arguments.py "
                    "(validate_args: 'bfloat16 requires gradient accumulation and all-reduce to be done in fp32', "
                    "accumulate_allreduce_grads_in_fp32 = True for bf16); "
                    "megatron/core/distributed/distributed_data_parallel.py (grad_dtype float when grad_reduce_in_fp32)",
                    "tensor_comm_overlap: transformer_engine/pytorch/module/base.py (initialize_ub: "
                    "qkv_fprop and fc1_fprop all-gathers by ring_exchange in tp_size chunks; proj_fprop and "
                    "fc2_fprop reduce-scatters by pipeline, num_splits 4; dgrad/wgrad collectives bulk-overlapped), "
                    "enabled by megatron/training/arguments.py --tp-comm-overlap",
                    "overlap_grad_reduce, bucket: megatron/core/distributed/distributed_data_parallel_config.py "
                    "(overlap_grad_reduce False; bucket_size None = max(40000000, 1000000 * dp_size) parameters)",
                    "attention: megatron/core/transformer/custom_layers/transformer_engine.py (TEDotProductAttention: "
                    "flash or cuDNN fused attention)"}});

} // namespace
} // namespace stepsim
