#include "sim/input/context_parse.hpp"

#include "sim/input/limits.hpp"

#include <fmt/format.h>

namespace stepsim {

void read_context_attention(JsonReader& r, ParallelSpec& p)
{
  p.context_attention = r.text("context_attention", std::string("ring"), {"ring", "ulysses", "usp", "all_gather"});
  if (p.context_attention == "usp") {
    // No default: the split of the context ranks between all-to-all and ring is the plan itself
    // (yunchang's set_seq_parallel_pg takes both degrees).
    if (!r.has("ulysses_degree"))
      r.problems().add(r.path_of("ulysses_degree"),
                       fmt::format("context_attention \"usp\" needs the size of its all-to-all groups, a divisor of "
                                   "context {} (context / ulysses_degree ranks form each ring)",
                                   p.context));
    p.ulysses_degree = static_cast<int>(r.integer("ulysses_degree", 1, 1, limits::kMaxGpus));
    if (p.context % p.ulysses_degree != 0)
      r.problems().add(r.path_of("ulysses_degree"),
                       fmt::format("{} does not divide context {}: USP runs context / ulysses_degree rings of "
                                   "ulysses_degree-rank all-to-all groups",
                                   p.ulysses_degree, p.context));
    return;
  }
  if (r.has("ulysses_degree")) {
    r.raw("ulysses_degree");
    r.problems().add(r.path_of("ulysses_degree"),
                     fmt::format("is the all-to-all group size of context_attention \"usp\", but context_attention is "
                                 "\"{}\"{}",
                                 p.context_attention,
                                 p.context_attention == "ulysses" ? " (whose all-to-alls span all context ranks)" : ""));
  }
  p.ulysses_degree = p.context_attention == "ulysses" ? p.context : 1;
}

void check_context_attention(const Scenario& s, Problems& problems)
{
  const auto& p = s.parallelism;
  const auto& m = s.model;
  const int u   = p.ulysses_degree;
  if (u <= 1 || p.context % u != 0 || m.num_attention_heads <= 0 || p.tensor <= 0 ||
      m.num_attention_heads % p.tensor != 0)
    return; // nothing to scatter, or a problem reported by its own check
  // The path of the degree the heads must divide by: context for ulysses, ulysses_degree for usp.
  const bool usp          = p.context_attention == "usp";
  const std::string path  = usp ? "parallelism.ulysses_degree" : "parallelism.context";
  const std::string which = usp ? fmt::format("ulysses_degree {}", u) : fmt::format("the context degree {}", u);
  // Tensor parallelism splits the heads first (Megatron's attention holds num_attention_heads /
  // tensor per rank); the all-to-all then scatters those over the Ulysses group in equal parts
  // (DeepSpeed, deepspeed/sequence/layer.py, single_all_to_all: the head dimension is reshaped
  // into seq_world_size equal slices).
  const int heads = m.num_attention_heads / p.tensor;
  if (heads % u != 0)
    problems.add(path, fmt::format("Ulysses needs the {} heads per tensor rank to divide by {}", heads, which));
  // K and V carry num_query_groups heads. Fewer groups than tensor ranks leaves each tensor rank
  // one replicated K/V head (Megatron's GQA), which cannot be scattered further; DeepSpeed
  // requires the K/V heads to divide too, and so does stepsim.
  const int groups = m.num_query_groups > 0 ? m.num_query_groups : m.num_attention_heads;
  if (groups < p.tensor)
    problems.add(path, fmt::format("Ulysses needs the K/V heads per tensor rank to divide by {}, but model.num_query_groups "
                                   "{} < tensor {} leaves each tensor rank one replicated K/V head",
                                   which, groups, p.tensor));
  else if (groups % p.tensor == 0 && (groups / p.tensor) % u != 0)
    problems.add(path, fmt::format("Ulysses needs the {} K/V heads (model.num_query_groups) per tensor rank to divide by {}",
                                   groups / p.tensor, which));
}

} // namespace stepsim
