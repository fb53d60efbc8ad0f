#include "workloads/parallel/ulysses.hpp"

#include "workloads/models/transformer.hpp"

namespace stepsim {

int ring_degree(const ParallelSpec& p) { return p.context / p.ulysses_degree; }

UlyssesExchange ulysses_exchange(const Scenario& s)
{
  UlyssesExchange u;
  u.degree = s.parallelism.ulysses_degree;
  if (u.degree <= 1)
    return u;
  const auto& m         = s.model;
  const double head_dim = attention_head_dim(m);
  const double tokens   = double(s.training.micro_batch_size) * m.seq_length / s.parallelism.context;
  const double e        = stored_element_bytes(s.training.precision);
  const double t        = s.parallelism.tensor;
  u.q_bytes             = tokens * m.num_attention_heads / t * head_dim * e;
  u.kv_bytes            = tokens * m.num_query_groups / t * head_dim * e;
  return u;
}

double ulysses_forward_buffer_bytes_per_layer(const Scenario& s)
{
  const UlyssesExchange u = ulysses_exchange(s);
  return u.degree > 1 ? 2 * u.q_bytes + 2 * u.kv_bytes : 0;
}

int ulysses_group_first(int c, int degree) { return c / degree * degree; }

// The ring joins the ranks at the same place in every Ulysses group: rank c's ring is c mod
// degree, and its neighbours are one Ulysses group up and down.
int ring_next(int c, int context, int degree) { return (c + degree) % context; }
int ring_prev(int c, int context, int degree) { return (c - degree + context) % context; }

TaskId ulysses_qkv_all_to_alls(const UlyssesExchange& u, BlockTasks& tasks, TaskId after)
{
  if (u.degree <= 1)
    return after;
  // DistributedAttention.forward calls _SeqAllToAll three times, Q, K, then V ("TODO Merge three
  // alltoall calls into one"), each synchronous; the context stream keeps them in that order.
  after = tasks.collective(Stream::Context, CollectiveOp::AllToAll, u.group, u.q_bytes, after);
  after = tasks.collective(Stream::Context, CollectiveOp::AllToAll, u.group, u.kv_bytes, after);
  return tasks.collective(Stream::Context, CollectiveOp::AllToAll, u.group, u.kv_bytes, after);
}

TaskId ulysses_output_all_to_all(const UlyssesExchange& u, BlockTasks& tasks, TaskId after)
{
  if (u.degree <= 1)
    return after;
  return tasks.collective(Stream::Context, CollectiveOp::AllToAll, u.group, u.q_bytes, after);
}

} // namespace stepsim
