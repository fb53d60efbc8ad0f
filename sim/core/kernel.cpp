#include "sim/core/kernel.hpp"

namespace stepsim {

double Kernel::flops() const
{
  switch (kind) {
  case KernelKind::Gemm:
    return 2.0 * m * n * k * batch;
  case KernelKind::Attention: {
    // QK^T and PV: 2 matmuls forward; backward recomputes QK^T and adds dV, dP, dQ, dK (5 in all).
    double matmuls = backward ? 5.0 : 2.0;
    double full    = matmuls * 2.0 * m * n * k * batch;
    return causal ? full * 0.5 : full;
  }
  case KernelKind::Memory:
    return 0.0;
  case KernelKind::Opaque:
    return opaque_flops;
  }
  return 0.0;
}

Kernel gemm(std::string name, double m, double n, double k, double element_bytes, double batch, double output_bytes)
{
  Kernel g;
  g.kind          = KernelKind::Gemm;
  g.name          = std::move(name);
  g.m             = m;
  g.n             = n;
  g.k             = k;
  g.batch         = batch;
  g.element_bytes = element_bytes;
  g.bytes         = ((m * k + k * n) * element_bytes + m * n * (output_bytes > 0 ? output_bytes : element_bytes)) * batch;
  return g;
}

Kernel memory_kernel(std::string name, double bytes)
{
  Kernel g;
  g.kind  = KernelKind::Memory;
  g.name  = std::move(name);
  g.bytes = bytes;
  return g;
}

Kernel opaque_kernel(std::string name, double flops)
{
  Kernel g;
  g.kind         = KernelKind::Opaque;
  g.name         = std::move(name);
  g.opaque_flops = flops;
  return g;
}

Kernel attention_kernel(std::string name, double batch_heads, double seq, double head_dim, bool causal, bool backward,
                        double element_bytes)
{
  Kernel g;
  g.kind          = KernelKind::Attention;
  g.name          = std::move(name);
  g.m             = seq;
  g.n             = seq;
  g.k             = head_dim;
  g.batch         = batch_heads;
  g.causal        = causal;
  g.backward      = backward;
  g.element_bytes = element_bytes;
  // Q, K, V and O (and their gradients backward) each read or written once.
  g.bytes = batch_heads * seq * head_dim * element_bytes * (backward ? 8.0 : 4.0);
  return g;
}

} // namespace stepsim
