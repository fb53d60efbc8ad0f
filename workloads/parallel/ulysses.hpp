// DeepSpeed-Ulysses (Jacobs et al. 2023, arXiv:2309.14509), as DeepSpeed runs it
// (deepspeed/sequence/layer.py: DistributedAttention.forward, _SeqAllToAll, single_all_to_all):
// every rank of the Ulysses group holds b·(s/cp) tokens of the sequence outside attention; before
// attention one all-to-all each for Q, K and V turns the sequence shards into head shards (the
// whole sequence of the group for 1/degree of the rank's heads), the local attention runs on
// them, and one all-to-all turns its output back (scatter and gather dimensions swapped).
// Backward is the mirror (_SeqAllToAll.backward applies the all-to-all to the gradient with the
// dimensions swapped): dO to head shards before the attention's backward, dQ, dK and dV back
// after it. The all-to-alls are synchronous: the attention waits for Q, K and V, the output
// projection for the output.
//
// With tensor parallelism the heads are split over tensor first (heads/t per rank), so each
// all-to-all moves one rank's b·(s/cp)·(heads/t)·head_dim elements for Q and the output, and
// b·(s/cp)·(query_groups/t)·head_dim for K and for V (grouped-query attention). A rank keeps
// 1/degree of its buffer and sends the rest: (degree−1)/degree of it per all-to-all (see
// bytes_sent_per_member, models/collectives/collective.hpp).
//
// USP (Fang & Zhao 2024, arXiv:2405.07719; yunchang, yunchang/hybrid/attn_layer.py,
// LongContextAttention.forward) runs the same all-to-alls inside groups of ulysses_degree
// consecutive context ranks and ring attention (workloads/parallel/context_parallel.hpp) across
// them, over context / ulysses_degree ranks (yunchang/globals.py, set_seq_parallel_pg with
// use_ulysses_low: the Ulysses groups are the low ranks, each ring takes one rank of every group).
#pragma once

#include "sim/core/scenario.hpp"
#include "workloads/block_tasks.hpp"

namespace stepsim {

struct UlyssesExchange {
  int degree = 1;  // ranks of the all-to-all group; 1 = no all-to-alls (ring attention alone)
  int group  = -1; // Workload::groups index (set per rank by the lowering)
  // One rank's buffer in each all-to-all, bytes: Q (and the attention's output), and K (and V).
  double q_bytes  = 0;
  double kv_bytes = 0;
};

// The all-to-alls of the scenario's context attention (degree 1 for ring).
UlyssesExchange ulysses_exchange(const Scenario& s);
// Ranks of each ring: context / ulysses_degree (context for ring attention, 1 for Ulysses).
int ring_degree(const ParallelSpec& p);
// Sum of the buffers of one layer's forward all-to-alls per rank and micro-batch (Q, K, V in,
// the output out): b·(s/cp)·(2·heads + 2·query_groups)/t·head_dim·e; backward moves the same.
// 0 without Ulysses.
double ulysses_forward_buffer_bytes_per_layer(const Scenario& s);

// Context-parallel rank `c`'s Ulysses group (context indices, in order) and its ring neighbours'
// context indices, for `degree` Ulysses ranks out of `context`.
int ulysses_group_first(int c, int degree);
int ring_next(int c, int context, int degree);
int ring_prev(int c, int context, int degree);

// The three all-to-alls of Q, K and V (forward) or of dQ, dK and dV (backward), one after the
// other on the context stream after `after`; returns the last, which the next step waits for
// (`after` when degree is 1).
TaskId ulysses_qkv_all_to_alls(const UlyssesExchange& u, BlockTasks& tasks, TaskId after);
// The all-to-all of the attention's output (forward) or of its gradient dO (backward).
TaskId ulysses_output_all_to_all(const UlyssesExchange& u, BlockTasks& tasks, TaskId after);

} // namespace stepsim
