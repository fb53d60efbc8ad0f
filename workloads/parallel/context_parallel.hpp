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
#pragma once

#include "sim/core/scenario.hpp"
#include "workloads/block_tasks.hpp"
#include "workloads/models/transformer.hpp"

namespace stepsim {

struct RingAttention {
  TransformerWorks::AttentionParts works;
  int context     = 1;  // ring size
  int next        = -1; // global ranks of the ring neighbours
  int prev        = -1;
  double kv_bytes = 0;  // one K and V block of the ring (ring_kv_bytes)
};

// Bytes of one K and V block per rank: 2·b·(s/context)·kv_hidden/tensor elements.
double ring_kv_bytes(const Scenario& s);
// Bytes one rank sends around the ring per layer and micro-batch: forward 2(cp−1)·b·(s/cp)·kv/t·e,
// backward twice that; 0 without context parallelism.
double ring_forward_bytes_per_layer(const Scenario& s);
double ring_backward_bytes_per_layer(const Scenario& s);

// The attention block's compute and ring transfers; `tag` numbers the ring transfers of the rank
// (the same sequence on every rank of the ring). Forward also serves the full recompute.
TaskId ring_attention_forward(const RingAttention& r, BlockTasks& tasks, TaskId after, int& tag);
// Input gradients; the weight gradients are the caller's (they need no ring).
TaskId ring_attention_backward(const RingAttention& r, BlockTasks& tasks, TaskId after, int& tag);

} // namespace stepsim
