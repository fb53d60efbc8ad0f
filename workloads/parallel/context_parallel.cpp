#include "workloads/parallel/context_parallel.hpp"

namespace stepsim {

namespace {

// Channels are matched in posting order on each (sender, receiver) pair, so ring tags may wrap;
// the replay keys them below 2^20.
int next_tag(int& tag)
{
  tag = (tag + 1) & 0xFFFFF;
  return tag;
}

} // namespace

double ring_kv_bytes(const Scenario& s)
{
  const auto& m         = s.model;
  const double kv       = kv_width(m);
  const double tokens   = double(s.training.micro_batch_size) * m.seq_length / s.parallelism.context;
  return 2.0 * tokens * kv / s.parallelism.tensor * stored_element_bytes(s.training.precision);
}

double ring_forward_bytes_per_layer(const Scenario& s)
{
  return (ring_degree(s.parallelism) - 1) * ring_kv_bytes(s);
}

double ring_backward_bytes_per_layer(const Scenario& s)
{
  return 2.0 * ring_forward_bytes_per_layer(s);
}

namespace {

// The all-gather forms (context_parallel.hpp): a collective's bytes are its whole buffer, the
// `context` K/V blocks.
TaskId gathered_forward(const RingAttention& r, BlockTasks& tasks, TaskId after)
{
  TaskId core = tasks.compute(r.works.qkv_forward, after);
  core        = tasks.collective(Stream::Context, CollectiveOp::AllGather, r.gather_group, r.context * r.kv_bytes, core);
  for (int step = 0; step < r.context; ++step)
    core = tasks.compute(r.works.core_forward, core);
  return tasks.compute(r.works.out_forward, core);
}

TaskId gathered_backward(const RingAttention& r, BlockTasks& tasks, TaskId after)
{
  TaskId core = tasks.compute(r.works.out_backward, after);
  core        = tasks.collective(Stream::Context, CollectiveOp::AllGather, r.gather_group, r.context * r.kv_bytes, core);
  for (int step = 0; step < r.context; ++step)
    core = tasks.compute(r.works.core_backward, core);
  core = tasks.collective(Stream::Context, CollectiveOp::ReduceScatter, r.gather_group, r.context * r.kv_bytes, core);
  return tasks.compute(r.works.qkv_backward, core);
}

} // namespace

TaskId ring_attention_forward(const RingAttention& r, BlockTasks& tasks, TaskId after, int& tag)
{
  if (r.all_gather)
    return gathered_forward(r, tasks, after);
  constexpr TaskId none = ProgramBuilder::kNone;
  TaskId core  = tasks.compute(r.works.qkv_forward, after);
  core         = ulysses_qkv_all_to_alls(r.ulysses, tasks, core); // Q, K, V to head shards
  TaskId block = core; // the K/V block the next step computes with is here
  TaskId sent  = none;
  for (int step = 0; step < r.context; ++step) {
    // Transformer Engine waits for both requests of the previous step, posts this step's, then
    // computes: the block moves on while this step computes with it.
    TaskId send = none, received = none;
    if (step < r.context - 1) {
      const int t = next_tag(tag);
      send        = tasks.point_to_point(TaskKind::Send, Stream::Context, r.next, t, r.kv_bytes, block);
      received    = tasks.point_to_point(TaskKind::Recv, Stream::ContextRecv, r.prev, t, r.kv_bytes, block);
    }
    core = tasks.compute(r.works.core_forward, block);
    tasks.depends(core, sent);
    block = received;
    sent  = send;
  }
  core = ulysses_output_all_to_all(r.ulysses, tasks, core); // the output back to sequence shards
  return tasks.compute(r.works.out_forward, core);
}

TaskId ring_attention_backward(const RingAttention& r, BlockTasks& tasks, TaskId after, int& tag)
{
  if (r.all_gather)
    return gathered_backward(r, tasks, after);
  constexpr TaskId none = ProgramBuilder::kNone;
  TaskId core  = tasks.compute(r.works.out_backward, after);
  core         = ulysses_output_all_to_all(r.ulysses, tasks, core); // dO to head shards
  TaskId block = core; // K/V (and, after the first step, the dK/dV so far) arrived
  TaskId sent  = none;
  if (r.context == 1) // Ulysses alone: one core over the whole sequence, no ring
    block = tasks.compute(r.works.core_backward, block);
  for (int step = 0; r.context > 1 && step < r.context; ++step) {
    // What moves on: K/V for the next step and the dK/dV accumulated up to the previous step's
    // core; K/V alone at the first step, dK/dV alone at the last, which brings each rank's dK/dV
    // home.
    const double bytes = (step < r.context - 1 ? r.kv_bytes : 0) + (step > 0 ? r.kv_bytes : 0);
    const int t        = next_tag(tag);
    TaskId send        = tasks.point_to_point(TaskKind::Send, Stream::Context, r.next, t, bytes, block);
    TaskId received    = tasks.point_to_point(TaskKind::Recv, Stream::ContextRecv, r.prev, t, bytes, block);
    tasks.depends(send, core);
    tasks.depends(received, core); // the previous rank sends once its own core is done, as this one
    TaskId next_core = tasks.compute(r.works.core_backward, block);
    tasks.depends(next_core, sent);
    core  = next_core;
    block = received;
    sent  = send;
  }
  // dQ, dK, dV back to sequence shards; on the context stream, after the ring's last send.
  block      = ulysses_qkv_all_to_alls(r.ulysses, tasks, block);
  TaskId qkv = tasks.compute(r.works.qkv_backward, block);
  tasks.depends(qkv, sent);
  return qkv;
}

} // namespace stepsim
