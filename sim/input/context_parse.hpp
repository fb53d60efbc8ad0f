// How attention runs over the context-parallel ranks: parallelism.context_attention ("ring",
// "ulysses", "usp" or "all_gather") and parallelism.ulysses_degree (usp only), read into ParallelSpec
// (sim/core/scenario.hpp), and the head counts they need. The lowering of each is in
// workloads/parallel/context_parallel.hpp and workloads/parallel/ulysses.hpp.
#pragma once

#include "sim/core/scenario.hpp"
#include "sim/input/json_reader.hpp"

namespace stepsim {

// Reads both keys from the `parallelism` object (before its reject_unknown_keys); p.context must
// be read already. Sets p.ulysses_degree to 1 for ring and all_gather and to p.context for ulysses.
void read_context_attention(JsonReader& parallelism, ParallelSpec& p);

// What the attention's all-to-alls need of the model: Ulysses scatters whole heads, so the heads
// and the query groups (K/V heads) per tensor rank must divide by the Ulysses degree, as
// DeepSpeed's DistributedAttention asserts; the load-balanced ring of ring and usp cuts the
// sequence into 2 × context chunks, Ulysses only into context shards.
void check_context_attention(const Scenario& s, Problems& problems);

} // namespace stepsim
