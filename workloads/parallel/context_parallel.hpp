// Context parallelism as Megatron-LM runs it (Transformer Engine's ring attention, "p2p"
// communication): the sequence is cut into 2·context chunks and rank i keeps chunks i and
// 2·context−1−i, so that every rank does the same causal work. Each attention layer then runs
// `context` steps: step j computes the local queries against the K/V block that arrived in step j−1
// while that block moves on to the next rank of the ring (context−1 sends of 2·b·(s/cp)·kv/t
// elements forward). Backward passes K/V around again together with the dK/dV accumulated so far
// (K/V at the first step, K/V and dK/dV in between, dK/dV at the last: twice the forward's bytes).
// With the load-balanced split, every step's core is exactly half of a (s/cp)² block, so each is
// costed as one causal (s/cp)² attention block. The gradients of context ranks are reduced with
// the data-parallel ones (workloads/lower.cpp).
//
// All-gather context parallelism (parallelism.context_attention "all_gather"; Llama 3, Dubey et al.
// 2024, arXiv:2407.21783, section 3.3.2: "we first all-gather the key (K) and value (V) tensors,
// and then compute attention output for the local query (Q) tensor chunk ... the all-gather
// communication latency is exposed in the critical path"; Transformer Engine's cp_comm_type
// "all_gather", AttnFuncWithCPAndKVAllGather) keeps the same load-balanced chunks and the same
// causal work per rank, `context` blocks of (s/cp)², but moves K/V by one all-gather over the
// context ranks that the attention waits for. Backward gathers K/V again (the gathered copy is
// not kept) and reduce-scatters dK/dV before the QKV projection's backward: the ring's bytes, none
// of them hidden behind the attention.
//
// Under Ulysses and USP (parallelism.context_attention, workloads/parallel/ulysses.hpp) the same
// functions put the Q, K, V all-to-alls between the QKV projection and the ring, and the output's
// between the ring and the output projection (backward: dO before the ring, dQ, dK, dV after it);
// the ring then has context / ulysses_degree ranks (1 for Ulysses: one whole-sequence core, no
// transfers), each holding b·(s/ring) tokens of heads/(t·ulysses) heads, so its K/V block has the
// same bytes as ring attention's over all context ranks.
#pragma once

#include "sim/core/scenario.hpp"
#include "workloads/block_tasks.hpp"
#include "workloads/models/transformer.hpp"
#include "workloads/parallel/ulysses.hpp"

namespace stepsim {

struct RingAttention {
  TransformerWorks::AttentionParts works;
  int context     = 1;  // ring size (context / ulysses_degree)
  int next        = -1; // global ranks of the ring neighbours
  int prev        = -1;
  double kv_bytes = 0;  // one K and V block of the ring (ring_kv_bytes)
  UlyssesExchange ulysses; // the all-to-alls around the ring (degree 1: none)
  bool all_gather  = false; // K/V all-gathered over the context ranks instead of passed around
  int gather_group = -1;    // all_gather: Workload::groups index of the rank's context ranks
};

// Bytes of one K and V block per rank: 2·b·(s/context)·kv_hidden/tensor elements.
double ring_kv_bytes(const Scenario& s);
// Bytes one rank sends around the ring per layer and micro-batch: forward 2(r−1)·b·(s/cp)·kv/t·e
// for a ring of r ranks (r = cp for ring attention), backward twice that; 0 without a ring.
double ring_forward_bytes_per_layer(const Scenario& s);
double ring_backward_bytes_per_layer(const Scenario& s);

// The attention block's compute and ring transfers; `tag` numbers the ring transfers of the rank
// (the same sequence on every rank of the ring). Forward also serves the full recompute.
TaskId ring_attention_forward(const RingAttention& r, BlockTasks& tasks, TaskId after, int& tag);
// Input gradients; the weight gradients are the caller's (they need no ring).
TaskId ring_attention_backward(const RingAttention& r, BlockTasks& tasks, TaskId after, int& tag);

} // namespace stepsim
