// Mixture-of-experts layers as Megatron-core runs them with its all-to-all token dispatcher: a
// router GEMM picks top_k experts per token, the tokens are permuted and sent to the ranks of the
// expert-parallel group that hold their experts (all-to-all), each rank runs its
// num_experts / expert experts' FFNs as one grouped GEMM, and a second all-to-all brings the
// outputs back to be combined. Backward mirrors it. With tensor parallelism (which Megatron only
// allows with sequence parallelism for MoE) each rank routes its 1/tensor of the tokens and the
// dispatched tokens are all-gathered over the tensor group before the experts, whose FFNs are
// split over it, and reduce-scattered after them.
//
// Expert parallelism is carved out of data × context parallelism as Megatron's expert
// RankGenerator does (workloads/parallel/layout.hpp): under the default "tp-cp-ep-dp-pp" the expert group
// is `expert` consecutive ranks of the flattened (context, data) index; expert parameters'
// gradients are reduced over the ranks holding the same experts (data × context / expert of
// them), the dense parameters' over all data × context ranks.
//
// With the experts' own tensor size (parallelism.expert_tensor, Megatron-Core's
// --expert-tensor-parallel-size, often 1 beside a dense tensor size of 2 to 8) the expert layers
// number a stage's tensor × context × data ranks as (expert_tensor, expert, expert-data): each
// rank routes its 1/tensor sequence shard, the dispatched tokens are all-gathered and the
// experts' outputs reduce-scattered over the expert tensor group (none at 1), each expert's FFN is
// split over it, and the expert-data group holds tensor × context × data / (expert_tensor ×
// expert) ranks (megatron/core/transformer/moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher:
// the all-to-all over the expert group, then gather_from_sequence_parallel_region over tp_group,
// the expert tensor group; megatron/core/parallel_state.py, initialize_model_parallel's
// expert_decoder_rank_generator).
#pragma once

#include "sim/core/scenario.hpp"
#include "workloads/block_tasks.hpp"
#include "workloads/parallel/layout.hpp"

#include <vector>

namespace stepsim {

inline bool is_moe(const ModelSpec& m) { return m.num_experts > 0; }
// The model as its dense layers see it (ModelSpec::first_dense_layers, moe_layer_freq,
// moe_layer_pattern; moe_layer()): no experts, an MLP of ffn_hidden_size. Every per-layer count
// of a dense model (parameters, kernels, activations) then holds for such a layer of a mixture of
// experts; for a dense model it is the model itself.
inline ModelSpec dense_layer_model(const ModelSpec& m)
{
  ModelSpec d          = m;
  d.num_experts        = 0;
  d.moe_shared_experts = 0;
  d.first_dense_layers = 0;
  d.moe_layer_freq     = 1;
  d.moe_layer_pattern.clear();
  return d;
}
inline Scenario dense_layer_scenario(const Scenario& s)
{
  Scenario d = s;
  d.model    = dense_layer_model(s.model);
  return d;
}
// Each expert's FFN width (moe_ffn_hidden_size, else ffn_hidden_size).
int expert_ffn_hidden_size(const ModelSpec& m);
// Parameters of one MoE layer's experts on one rank: num_experts / expert experts, each FFN split
// over tensor (and their biases with layernorm-style models).
double expert_parameters_per_rank(const ModelSpec& m, int tensor, int expert);
// The router's weight (hidden × experts), kept whole on every tensor rank as Megatron does.
double router_parameters(const ModelSpec& m);
// Tokens of one micro-batch that one rank routes: b·s/context, split over tensor.
double routed_tokens_per_rank(const Scenario& s);
// What the experts' tensor all-gather multiplies a rank's routed tokens by, over the dense
// tensor size: expert_tensor / tensor (1 with Megatron's default, the experts split as the dense
// layers; parallelism.expert_tensor).
double expert_tensor_gather(const ParallelSpec& p);
// Tokens one local expert processes per micro-batch (after the expert tensor all-gather):
// capacity_factor · b·(s/context)·top_k · expert / num_experts · expert_tensor / tensor.
double tokens_per_local_expert(const Scenario& s);
// One rank's buffer in each token all-to-all (dispatch or combine, forward or backward):
// routed tokens · top_k · capacity_factor · hidden · element bytes. A ring or direct all-to-all
// sends (expert−1)/expert of it.
double moe_all_to_all_bytes(const Scenario& s);

// Shared experts, as HuggingFace's Qwen2MoeSparseMoeBlock (models/qwen2_moe/modeling_qwen2_moe.py:
// `shared_expert`, a Qwen2MoeMLP of shared_expert_intermediate_size that every token goes through,
// its output scaled by `F.sigmoid(self.shared_expert_gate(hidden_states))`, a Linear(hidden, 1)
// without bias, and added to the routed experts' output) and DeepSeek-MoE (n_shared_experts
// experts of moe_intermediate_size, run as one MLP of their summed width) define them; Megatron-core
// runs them as SharedExpertMLP (megatron/core/transformer/moe/shared_experts.py): one dense MLP of
// moe_shared_expert_intermediate_size (the summed width), column- and row-parallel over the tensor
// group like the dense MLP (an all-gather of the layer's input before fc1 and a reduce-scatter of
// fc2's output under sequence parallelism), its optional gate_weight (1 × hidden) whole on every
// tensor rank, computed after the routed experts' combine (MoELayer.forward; the
// --moe-shared-expert-overlap that hides it behind the dispatch is not modelled). Their parameters
// are dense ones: replicated over the expert-parallel group, reduced over all data × context ranks.
inline bool has_shared_experts(const ModelSpec& m) { return is_moe(m) && m.moe_shared_experts > 0; }
// The shared experts' FFN width together: moe_shared_experts × each one's width
// (moe_shared_expert_ffn_hidden_size, else the routed experts'); 0 without shared experts.
double shared_experts_ffn_hidden_size(const ModelSpec& m);
// Parameters of one MoE layer's shared experts on one tensor rank: their FFN split over tensor (with
// biases for layernorm-style models, as the dense MLP's), the gate whole.
double shared_expert_parameters_per_rank(const ModelSpec& m, int tensor);
// Parameters of one routed expert (its whole FFN, no parallelism).
double routed_expert_parameters(const ModelSpec& m);

// Activation bytes one MoE layer keeps per micro-batch beyond what the dense MLP formula of
// Korthikanti et al. counts (negative when the experts keep less): the permuted token copies (all
// gathered over tensor), the experts' FFN input, intermediate and activation output, in place of
// the dense MLP's, and the shared experts' fc1 input, activation input and fc2 input as the dense
// MLP's terms count them at their width (with the gate, the shared output it scales); 0 for a dense
// model.
double moe_activation_delta_bytes(const Scenario& s);

struct MoeWorks {
  int router_forward, experts_forward, combine_forward;
  int combine_backward, router_backward;                // input gradients (+ the router's weight gradient)
  int experts_backward, experts_backward_input;         // with / without the experts' weight gradients
  int router_backward_input, weight_backward;           // split backward: input part, weight part
  // The shared experts (-1 without them): forward, backward (input and weight gradients) and
  // backward without the weight gradients, which weight_backward then holds.
  int shared_forward = -1, shared_backward = -1, shared_backward_input = -1;
};
MoeWorks add_moe_works(const Scenario& s, std::vector<Work>& works);

struct MoeBlock {
  MoeWorks works{};
  int expert         = 1;  // expert-parallel degree
  int tensor         = 1;  // the experts' tensor-parallel size (expert_tensor_size)
  int expert_group   = -1; // Workload::groups index: the all-to-all group
  int tensor_group   = -1;
  double all_to_all_bytes = 0; // moe_all_to_all_bytes
  // The shared experts' tensor collectives: the dense tensor group (-1 = tensor 1) and the bytes of
  // the gathered activation (micro-batch × sequence/context × hidden).
  int shared_tensor_group    = -1;
  double shared_gather_bytes = 0;
};

// Forward (also the full recompute): router, dispatch, experts, return, shared experts, combine.
TaskId moe_forward(const MoeBlock& b, BlockTasks& tasks, TaskId after);
// Backward: the mirror; `split` leaves the weight gradients to works.weight_backward (ZB-H1).
TaskId moe_backward(const MoeBlock& b, BlockTasks& tasks, TaskId after, bool split);

// The gradients of the experts a rank holds without ZeRO: all-reduced over the ranks that hold
// the same experts (expert_data_group_ranks), in buckets of parallelism.bucket_size as the step's
// last backward produces them, then their optimizer step. Under ZeRO the experts go through a
// DataParallelLowering of their own over that group, as the dense parameters do over theirs
// (workloads/lower.cpp).
class ExpertGradients {
public:
  explicit ExpertGradients(const Scenario& s) : s_(s) {}
  // A new rank: `group` is its expert-data-parallel group (-1 = none).
  void begin_rank(int group, int stage);
  // A layer's backward produced its experts' gradients (`last`: the update's last for them).
  void ready(double parameters, TaskId produced_by, bool last);
  // The reductions of the update and the experts' optimizer step; returns the task the rest of
  // the optimizer step waits for (`after` when there are no experts). Ends the update.
  TaskId reduce_and_step(BlockTasks& tasks, std::vector<Work>& works, TaskId after, TaskId last_compute);

private:
  struct Bucket {
    double bytes = 0;
    TaskId ready = static_cast<TaskId>(-1);
  };
  const Scenario& s_;
  int group_ = -1, stage_ = 0;
  std::vector<Bucket> buckets_;
  Bucket pending_;
  double parameters_ = 0;
};

// Ranks of the expert-parallel group of `rank`, of its expert-data-parallel group (the ranks that
// hold the same experts) and of its expert-tensor group (which splits the experts' FFNs), in ring
// order, as Megatron's expert RankGenerator numbers them under parallelism.rank_order.
std::vector<int> expert_group_ranks(const Layout& l, int rank);
std::vector<int> expert_data_group_ranks(const Layout& l, int rank);
std::vector<int> expert_tensor_group_ranks(const Layout& l, int rank);

} // namespace stepsim
