#include "workloads/models/moe.hpp"

#include "sim/core/framework.hpp"
#include "workloads/parallel/data_parallel.hpp"
#include "workloads/models/transformer.hpp"

#include <fmt/format.h>

namespace stepsim {

namespace {

double mlp_matrices(const ModelSpec& m) { return m.mlp == "swiglu" ? 3.0 : 2.0; }

std::vector<Kernel> joined(std::vector<Kernel> a, const std::vector<Kernel>& b)
{
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

} // namespace

int expert_ffn_hidden_size(const ModelSpec& m)
{
  return m.moe_ffn_hidden_size > 0 ? m.moe_ffn_hidden_size : m.ffn_hidden_size;
}

double routed_expert_parameters(const ModelSpec& m)
{
  const double h      = m.hidden_size;
  const double ffn    = expert_ffn_hidden_size(m);
  const double biases = m.norm == "layernorm" ? ffn + h : 0;
  return mlp_matrices(m) * h * ffn + biases;
}

double expert_parameters_per_rank(const ModelSpec& m, int tensor, int expert)
{
  return double(m.num_experts) / expert * routed_expert_parameters(m) / tensor;
}

double shared_experts_ffn_hidden_size(const ModelSpec& m)
{
  if (!has_shared_experts(m))
    return 0;
  const int each = m.moe_shared_expert_ffn_hidden_size > 0 ? m.moe_shared_expert_ffn_hidden_size
                                                           : expert_ffn_hidden_size(m);
  return double(m.moe_shared_experts) * each;
}

double shared_expert_parameters_per_rank(const ModelSpec& m, int tensor)
{
  if (!has_shared_experts(m))
    return 0;
  const double h      = m.hidden_size;
  const double ffn    = shared_experts_ffn_hidden_size(m);
  const double biases = m.norm == "layernorm" ? ffn + h : 0;
  return (mlp_matrices(m) * h * ffn + biases) / tensor + (m.moe_shared_expert_gate ? h : 0);
}

double router_parameters(const ModelSpec& m) { return double(m.hidden_size) * m.num_experts; }

double routed_tokens_per_rank(const Scenario& s)
{
  return double(s.training.micro_batch_size) * s.model.seq_length / s.parallelism.context / s.parallelism.tensor;
}

double expert_tensor_gather(const ParallelSpec& p)
{
  return expert_tensor_size(p) == p.tensor ? 1.0 : double(expert_tensor_size(p)) / p.tensor;
}

double tokens_per_local_expert(const Scenario& s)
{
  const auto& m = s.model;
  return m.moe_capacity_factor * double(s.training.micro_batch_size) * m.seq_length / s.parallelism.context *
         m.moe_top_k * s.parallelism.expert / m.num_experts * expert_tensor_gather(s.parallelism);
}

double moe_all_to_all_bytes(const Scenario& s)
{
  const auto& m = s.model;
  return routed_tokens_per_rank(s) * m.moe_top_k * m.moe_capacity_factor * m.hidden_size *
         stored_element_bytes(s.training.precision);
}

double moe_activation_delta_bytes(const Scenario& s)
{
  const auto& m = s.model;
  if (!is_moe(m))
    return 0;
  const double t    = s.parallelism.tensor;
  const bool sp     = s.parallelism.sequence_parallel;
  const double sb   = double(s.training.micro_batch_size) * m.seq_length / s.parallelism.context;
  const double h    = m.hidden_size;
  const double e    = stored_element_bytes(s.training.precision);
  const double dense = dense_mlp_activation_bytes(s); // the MLP the experts replace
  // Token copies: each expert tensor rank holds all of its group's (the micro-batch's with the
  // dense tensor size), each expert's FFN split over the group.
  const double copies = sb * m.moe_top_k * m.moe_capacity_factor * expert_tensor_gather(s.parallelism);
  const double ffn    = expert_ffn_hidden_size(m) / expert_tensor_size(s.parallelism);
  const double fc1    = ffn * (m.mlp == "swiglu" ? 2 : 1);
  // fc1's input, the activation's inputs and fc2's input of every token copy; under Transformer
  // Engine's FP8 the two GEMMs' inputs as the FP8 copies they took, one byte an element
  // (_GroupedLinear.forward saves its split_quantize'd inputs, columnwise only, as the dense
  // layers' linears do: transformer_kind.cpp, keeps_fp8_inputs).
  const double saved   = keeps_fp8_inputs(s) ? copies * (h + e * fc1 + ffn) : copies * e * (h + fc1 + ffn);
  const double experts = saved + sb * h / (sp ? t : 1) * (e + 1); // + router input, mask
  // The shared experts keep what a dense MLP of their width keeps (transformer_kind.cpp,
  // mlp_activation_terms, at e bytes an element and without a dropout mask): fc1's input (a 1/t
  // shard under sequence parallelism, which Megatron gathers again for the weight gradient), the
  // activation's inputs and fc2's input, 1/t of the width each; with the gate, the shared output
  // it scales (sigmoid(g)·y needs y for g's gradient), in sequence shards.
  double shared = 0;
  if (has_shared_experts(m)) {
    const double width = shared_experts_ffn_hidden_size(m) / t;
    shared = sb * e * (h / (sp ? t : 1) + width * (m.mlp == "swiglu" ? 2 : 1) + width) +
             (m.moe_shared_expert_gate ? sb * h / (sp ? t : 1) * e : 0);
  }
  return experts + shared - dense;
}

MoeWorks add_moe_works(const Scenario& s, std::vector<Work>& works)
{
  const auto& m        = s.model;
  const double e       = element_bytes(s.training.precision);        // the GEMMs' operands
  const double a       = stored_element_bytes(s.training.precision); // every other tensor
  const auto& framework = FrameworkRegistry::get(s.training.framework, "training.framework");
  // Under Transformer Engine's FP8 each expert GEMM's bf16 input is cast to FP8 with its
  // transpose (2 bytes read, 1 + 1 written an element), expert by expert (_GroupedLinear: tex.
  // split_quantize of fc1's input, the permuted tokens, and of fc2's, the activation's bf16
  // output; backward, of each output gradient), where the dense layers' norm and activation write
  // FP8 themselves (transformer.cpp). torchao's float8 (fp8_dynamic_scaling) is not modelled for
  // the experts: their GEMMs take FP8 operands without casts.
  const bool te_fp8    = keeps_fp8_inputs(s);
  const double t       = s.parallelism.tensor;
  const double h       = m.hidden_size;
  const double experts = m.num_experts;
  const double local   = experts / s.parallelism.expert; // experts on this rank, one grouped GEMM
  const double tokens  = routed_tokens_per_rank(s);
  const double routed  = tokens * m.moe_top_k * m.moe_capacity_factor; // token copies sent out
  const double per_expert = tokens_per_local_expert(s);
  const double ffn     = expert_ffn_hidden_size(m) / expert_tensor_size(s.parallelism);
  const double fc1_n   = ffn * (m.mlp == "swiglu" ? 2 : 1);
  const double act     = m.mlp == "swiglu" ? 3 : 2; // swiglu reads two inputs
  auto add = [&](const char* name, std::vector<Kernel> kernels) {
    works.push_back(Work{name, std::move(kernels), 0});
    return static_cast<int>(works.size() - 1);
  };

  // Routing: norm, logits over the experts, fp32 softmax and top-k, then the permutation that
  // groups each expert's token copies.
  const std::vector<Kernel> router_f = {memory_kernel("post_attention_norm", tokens * h * 2 * a),
                                        gemm("router", tokens, experts, h, e),
                                        memory_kernel("router_softmax_topk", tokens * experts * 3 * 4),
                                        memory_kernel("permute", routed * h * 2 * a)};
  // The local experts' GEMMs: one batched GEMM, or one launch per expert where the framework's
  // grouped GEMM issues them so (FrameworkProfile::expert_gemm_per_expert).
  auto expert_gemm = [&](const char* name, double m_, double n_, double k_) {
    Kernel k = gemm(name, m_, n_, k_, e, local);
    if (framework.expert_gemm_per_expert)
      k.launches = local;
    return k;
  };
  auto fp8_cast = [&](std::vector<Kernel>& kernels, const char* name, double width) {
    if (te_fp8)
      kernels.push_back(memory_kernel(name, local * per_expert * width * 4));
  };
  std::vector<Kernel> experts_f;
  fp8_cast(experts_f, "expert_fc1_input_fp8_cast", h);
  experts_f.push_back(expert_gemm("expert_fc1", per_expert, fc1_n, h));
  experts_f.push_back(
      memory_kernel(m.mlp == "swiglu" ? "expert_swiglu" : "expert_gelu", local * per_expert * ffn * act * a));
  fp8_cast(experts_f, "expert_fc2_input_fp8_cast", ffn);
  experts_f.push_back(expert_gemm("expert_fc2", per_expert, h, ffn));
  // The residual add, as the dense layer's (transformer.cpp): with dropout, a mask beside it.
  const bool dropout        = m.dropout > 0;
  const double residual_rw  = dropout ? 4 : 3;
  const std::vector<Kernel> combine_f = {
      memory_kernel("unpermute_combine", routed * h * 2 * a + tokens * h * a),
      memory_kernel(dropout ? "dropout_residual" : "residual_add", tokens * h * residual_rw * a)};

  const std::vector<Kernel> combine_b = {
      memory_kernel(dropout ? "dropout_residual_bwd" : "residual_add_bwd", tokens * h * residual_rw * a),
                                         memory_kernel("unpermute_combine_bwd", routed * h * 2 * a + tokens * h * a)};
  std::vector<Kernel> experts_bi;
  fp8_cast(experts_bi, "expert_fc2_output_grad_fp8_cast", h);
  experts_bi.push_back(expert_gemm("expert_fc2_dgrad", per_expert, ffn, h));
  experts_bi.push_back(memory_kernel("expert_activation_bwd", local * per_expert * ffn * (act + 1) * a));
  fp8_cast(experts_bi, "expert_fc1_output_grad_fp8_cast", fc1_n);
  experts_bi.push_back(expert_gemm("expert_fc1_dgrad", per_expert, h, fc1_n));
  const std::vector<Kernel> experts_bw = {expert_gemm("expert_fc2_wgrad", ffn, h, per_expert),
                                          expert_gemm("expert_fc1_wgrad", h, fc1_n, per_expert)};
  const std::vector<Kernel> router_bi = {memory_kernel("permute_bwd", routed * h * 2 * a),
                                         memory_kernel("router_softmax_topk_bwd", tokens * experts * 3 * 4),
                                         gemm("router_dgrad", tokens, h, experts, e),
                                         memory_kernel("post_attention_norm_bwd", tokens * h * 4 * a)};
  const std::vector<Kernel> router_bw = {gemm("router_wgrad", h, experts, tokens, e)};

  // The shared experts (moe.hpp): a dense MLP of their summed width over all the rank's tokens
  // (b·s/cp, gathered over tensor like the dense MLP's input), its width split over tensor; the gate
  // a GEMV over the rank's 1/t of the tokens (its sequence shard), whose sigmoid scales the shared
  // output before it is added to the routed experts' (in the combine). Backward as the dense MLP's.
  const bool shared       = has_shared_experts(m);
  const bool gate         = shared && m.moe_shared_expert_gate;
  const double all_tokens = tokens * t;                  // the rank's tokens, gathered over tensor
  const double s_ffn      = shared_experts_ffn_hidden_size(m) / t;
  const double s_fc1_n    = s_ffn * (m.mlp == "swiglu" ? 2 : 1);
  std::vector<Kernel> shared_f, shared_bi, shared_bw;
  if (shared) {
    if (gate)
      shared_f.push_back(gemm("shared_expert_gate", tokens, 1, h, e));
    shared_f.push_back(gemm("shared_expert_fc1", all_tokens, s_fc1_n, h, e));
    shared_f.push_back(memory_kernel(m.mlp == "swiglu" ? "shared_expert_swiglu" : "shared_expert_gelu",
                                     all_tokens * s_ffn * act * a));
    shared_f.push_back(gemm("shared_expert_fc2", all_tokens, h, s_ffn, e));
    shared_bi = {gemm("shared_expert_fc2_dgrad", all_tokens, s_ffn, h, e),
                 memory_kernel("shared_expert_activation_bwd", all_tokens * s_ffn * (act + 1) * a),
                 gemm("shared_expert_fc1_dgrad", all_tokens, h, s_fc1_n, e)};
    shared_bw = {gemm("shared_expert_fc2_wgrad", s_ffn, h, all_tokens, e),
                 gemm("shared_expert_fc1_wgrad", h, s_fc1_n, all_tokens, e)};
    if (gate) {
      shared_bi.push_back(gemm("shared_expert_gate_dgrad", tokens, h, 1, e));
      shared_bw.push_back(gemm("shared_expert_gate_wgrad", h, 1, tokens, e));
    }
  }
  // With the gate, Megatron scales the shared output (read, write) before the add (read two,
  // write one); backward, the scaling's gradient reads the output gradient, the shared output and
  // the score and writes the shared output's gradient (the add's gradient is the output's own).
  std::vector<Kernel> combine_f_all = combine_f, combine_b_all;
  if (shared)
    combine_f_all.push_back(memory_kernel(gate ? "shared_expert_gate_add" : "shared_expert_add",
                                          tokens * h * (gate ? 5 : 3) * a));
  combine_b_all = combine_b;
  if (gate)
    combine_b_all.insert(combine_b_all.begin() + 1, memory_kernel("shared_expert_gate_bwd", tokens * h * 3 * a));

  MoeWorks w{};
  w.router_forward         = add("moe_router_forward", router_f);
  works[static_cast<size_t>(w.router_forward)].synchronizes_host = framework.moe_dispatch_synchronizes_host;
  w.experts_forward        = add("moe_experts_forward", experts_f);
  w.combine_forward        = add("moe_combine_forward", combine_f_all);
  w.combine_backward       = add("moe_combine_backward", combine_b_all);
  w.experts_backward       = add("moe_experts_backward", joined(experts_bi, experts_bw));
  w.experts_backward_input = add("moe_experts_backward_input", experts_bi);
  w.router_backward        = add("moe_router_backward", joined(router_bi, router_bw));
  w.router_backward_input  = add("moe_router_backward_input", router_bi);
  w.weight_backward        = add("moe_backward_weight", joined(joined(experts_bw, router_bw), shared_bw));
  if (shared) {
    w.shared_forward        = add("moe_shared_experts_forward", shared_f);
    w.shared_backward       = add("moe_shared_experts_backward", joined(shared_bi, shared_bw));
    w.shared_backward_input = add("moe_shared_experts_backward_input", shared_bi);
  }
  return w;
}

namespace {

// Dispatch (or, backward, the gradient of the combine) up to the experts' input.
TaskId to_experts(const MoeBlock& b, BlockTasks& tasks, TaskId after)
{
  if (b.expert > 1)
    after = tasks.collective(Stream::Expert, CollectiveOp::AllToAll, b.expert_group, b.all_to_all_bytes, after);
  if (b.tensor > 1) // the tensor group's token copies, each rank's expert FFN shard runs on all
    after = tasks.collective(Stream::Tensor, CollectiveOp::AllGather, b.tensor_group, b.all_to_all_bytes * b.tensor,
                             after);
  return after;
}

TaskId from_experts(const MoeBlock& b, BlockTasks& tasks, TaskId after)
{
  if (b.tensor > 1)
    after = tasks.collective(Stream::Tensor, CollectiveOp::ReduceScatter, b.tensor_group,
                             b.all_to_all_bytes * b.tensor, after);
  if (b.expert > 1)
    after = tasks.collective(Stream::Expert, CollectiveOp::AllToAll, b.expert_group, b.all_to_all_bytes, after);
  return after;
}

// The shared experts' pass between the dense tensor group's collectives, as block() lowers the
// dense MLP (workloads/lower.cpp): under sequence parallelism (which a MoE model needs with tensor
// > 1) an all-gather of the input (forward) or of the output gradient (backward) before, a
// reduce-scatter after.
TaskId shared_experts(const MoeBlock& b, BlockTasks& tasks, int work, TaskId after)
{
  if (work < 0)
    return after;
  if (b.shared_tensor_group >= 0)
    after = tasks.collective(Stream::Tensor, CollectiveOp::AllGather, b.shared_tensor_group, b.shared_gather_bytes,
                             after);
  after = tasks.compute(work, after);
  if (b.shared_tensor_group >= 0)
    after = tasks.collective(Stream::Tensor, CollectiveOp::ReduceScatter, b.shared_tensor_group,
                             b.shared_gather_bytes, after);
  return after;
}

} // namespace

TaskId moe_forward(const MoeBlock& b, BlockTasks& tasks, TaskId after)
{
  after = tasks.compute(b.works.router_forward, after);
  after = to_experts(b, tasks, after);
  after = tasks.compute(b.works.experts_forward, after);
  after = from_experts(b, tasks, after);
  after = shared_experts(b, tasks, b.works.shared_forward, after);
  return tasks.compute(b.works.combine_forward, after);
}

TaskId moe_backward(const MoeBlock& b, BlockTasks& tasks, TaskId after, bool split)
{
  after = tasks.compute(b.works.combine_backward, after);
  after = shared_experts(b, tasks, split ? b.works.shared_backward_input : b.works.shared_backward, after);
  after = to_experts(b, tasks, after);
  after = tasks.compute(split ? b.works.experts_backward_input : b.works.experts_backward, after);
  after = from_experts(b, tasks, after);
  return tasks.compute(split ? b.works.router_backward_input : b.works.router_backward, after);
}

void ExpertGradients::begin_rank(int group, int stage)
{
  group_   = group;
  stage_   = stage;
  buckets_.clear();
  pending_    = Bucket{};
  parameters_ = 0;
}

void ExpertGradients::ready(double parameters, TaskId produced_by, bool last)
{
  if (!last || parameters <= 0)
    return;
  parameters_ += parameters;
  pending_.bytes += parameters * (element_bytes(s_.training.precision) == 4 ? 4 : 2);
  pending_.ready = produced_by;
  if (pending_.bytes >= s_.parallelism.bucket_bytes) {
    buckets_.push_back(pending_);
    pending_ = Bucket{};
  }
}

TaskId ExpertGradients::reduce_and_step(BlockTasks& tasks, std::vector<Work>& works, TaskId after, TaskId last_compute)
{
  if (pending_.bytes > 0)
    buckets_.push_back(pending_);
  pending_ = Bucket{};
  if (parameters_ > 0) {
    TaskId reduced = after;
    for (const Bucket& b : buckets_) {
      if (group_ < 0)
        break;
      const TaskId ready = s_.parallelism.overlap_grad_reduce && b.ready != static_cast<TaskId>(-1) ? b.ready : last_compute;
      reduced = tasks.collective(Stream::Data, CollectiveOp::AllReduce, group_, b.bytes, ready);
      tasks.depends(reduced, after);
    }
    works.push_back(Work{fmt::format("expert_optimizer_stage{}", stage_),
                         {memory_kernel("expert_optimizer_step", parameters_ * optimizer_bytes_per_parameter(s_.training))},
                         0});
    after = tasks.compute(static_cast<int>(works.size() - 1), reduced);
  }
  buckets_.clear();
  parameters_ = 0;
  return after;
}

std::vector<int> expert_group_ranks(const Layout& l, int rank) { return l.experts().group(rank, {Axis::Expert}); }

std::vector<int> expert_data_group_ranks(const Layout& l, int rank) { return l.experts().group(rank, {Axis::Data}); }

std::vector<int> expert_tensor_group_ranks(const Layout& l, int rank) { return l.experts().group(rank, {Axis::Tensor}); }

} // namespace stepsim
