// One GPU kernel with its shape, as the workload lowers a layer. Cost models turn a Kernel and a
// device into seconds; the workload never decides how long anything takes.
#pragma once

#include <string>

namespace stepsim {

enum class KernelKind {
  Gemm,      // batch × (m×k)·(k×n)
  Attention, // fused (FlashAttention-style) attention over batch_heads × seq_q × seq_k × head_dim
  Memory,    // bandwidth-bound: elementwise, norms, softmax, optimizer
  Opaque,    // known only by its FLOPs, not its shape (a layer-list layer given by figures)
};

// The fused-attention implementations a device calibration may give a figure of its own
// ("flash-attention-1": flash-attn 1.x or its Triton kernel, the first generation).
inline constexpr const char* kAttentionKernels[] = {"flash-attention-1", "flash-attention-2", "flash-attention-3",
                                                    "cudnn"};

struct Kernel {
  KernelKind kind = KernelKind::Memory;
  std::string name;
  double m = 0, n = 0, k = 0, batch = 1; // Gemm; Attention uses m = seq_q, n = seq_k, k = head_dim
  bool causal   = false;                 // Attention
  bool backward = false;                 // Attention backward recomputes and runs five matmuls
  double bytes  = 0;                     // bytes read and written (Memory), or element bytes (Gemm)
  double element_bytes = 2;
  double opaque_flops  = 0;              // Opaque
  // How many times the kernel is launched in a row (Memory: a loop of copies, one per chunk;
  // Gemm: a batch run as one GEMM per member, as Transformer Engine's grouped GEMM runs a MoE
  // layer's experts); each launch pays the device's kernel overhead, the bytes and FLOPs are
  // those of all of them together.
  double launches = 1;
  // Attention: the fused implementation that runs it (training.attention_kernel); empty, the
  // device's common figure.
  std::string implementation;
  // The precision the kernel runs at when it is not the run's (empty): in an fp8 run the GEMMs
  // outside Transformer Engine's modules (Megatron's output layer, unfused attention) run bf16.
  std::string precision;

  // FLOPs the kernel really performs (causal attention skips the masked half).
  double flops() const;
};

// output_bytes: bytes of a result element when not element_bytes (an FP8 GEMM's bf16 result).
Kernel gemm(std::string name, double m, double n, double k, double element_bytes, double batch = 1,
            double output_bytes = 0);
Kernel memory_kernel(std::string name, double bytes);
Kernel opaque_kernel(std::string name, double flops);
Kernel attention_kernel(std::string name, double batch_heads, double seq, double head_dim, bool causal, bool backward,
                        double element_bytes);

} // namespace stepsim
