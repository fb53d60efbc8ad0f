// NCCL's three protocols, and the choice of algorithm and protocol its tuner makes per collective
// (NCCL v2.20.3 src/graph/tuning.cc). A protocol changes what one step of an algorithm costs,
// not which members exchange data:
//   LL      8-byte stores of 4 bytes of data and a 4-byte flag: the lowest latency per step, half
//           the wire bandwidth;
//   LL128   128-byte lines of 120 bytes of data and an 8-byte flag: 120/128 of the bandwidth at a
//           few hundred nanoseconds more per step (NCCL enables it only on NVLink nodes);
//   Simple  plain copies with a memory fence per chunk: the whole bandwidth, the longest step.
// The platform's links carry the LL step latency (configs/calibration/links.json step_latency);
// a protocol adds its own per-step latency beyond that on each path type (inside a node, between
// nodes), its base latency per algorithm (NCCL's baseLat: launch and set-up), and multiplies the
// bytes each step puts on the wire. All figures come from links.json "protocols".
//
// An algorithm run with a protocol is a CollectiveAlgorithm of its own, named "ring/LL" etc., whose
// steps carry the wire bytes; the engine pays launch_seconds() once before the steps, which is the
// base latency plus the protocol's extra step latencies along the collective's critical path.
#pragma once

#include "models/collectives/collective.hpp"
#include "models/link_calibration.hpp"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace stepsim {

enum class Protocol { LL, LL128, Simple };
inline constexpr std::array<Protocol, 3> kProtocols = {Protocol::LL, Protocol::LL128, Protocol::Simple};
const char* protocol_name(Protocol p);
std::optional<Protocol> protocol_named(const std::string& name);

// links.json's figures for protocol `p` (link_efficiency().protocols).
const ProtocolCost& protocol_cost(Protocol p);

// `base` (a concrete algorithm) run with protocol `p`: the same steps with bytes × wire factor.
// The object lives for the whole process.
const CollectiveAlgorithm& with_protocol(const CollectiveAlgorithm& base, Protocol p);

// The protocols NCCL may run `a` (bare) with: NVLS runs Simple only, the others all three.
std::vector<Protocol> protocols_for(const CollectiveAlgorithm& a);

// The fixed cost the engine pays before the steps of `a` (an algorithm from with_protocol): its
// protocol's base latency for the algorithm, plus the protocol's extra per-step latency along the
// collective's critical path. 0 for an algorithm without protocol, or when the group's paths have
// no latency (an idealised, free network).
double launch_seconds(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes);

// launch_seconds + uncontended_seconds on the group's measured paths (g.intra, g.inter): what the
// tuner compares.
double planned_seconds(const CollectiveAlgorithm& a, CollectiveOp op, const GroupShape& g, double bytes);

// The fastest of the concrete algorithms `algorithms` (bare), each with the protocols it may
// run among `allowed` (all when empty), by planned_seconds; ties go to the first pair. Cached per
// group shape and size.
const CollectiveAlgorithm& fastest(const std::vector<const CollectiveAlgorithm*>& algorithms,
                                   const std::vector<Protocol>& allowed, CollectiveOp op, const GroupShape& g,
                                   double bytes);

// `chosen` (a registered name, "auto" or a per-type choice) with its protocol picked per
// collective: simulation.nccl_protocol "auto" (the fastest, like NCCL's tuner) or one forced for
// every collective ("LL", "LL128", "Simple"). Throws InputError at `path` for an unknown name. Under
// `auto` with the protocol left to it, RCCL's MSCCL programs come first (msccl_program).
// Without protocol costs (no links.json) the algorithms run bare.
CollectiveAlgorithm with_protocol_choice(const CollectiveAlgorithm& chosen, const std::string& protocol,
                                         const std::string& path);

// The MSCCL program RCCL runs `op` of `bytes` with on the group (models/collectives/msccl.cpp), as
// an algorithm with its protocol, or null where none applies. `auto` takes it before the tuner.
const CollectiveAlgorithm* msccl_program(CollectiveOp op, const GroupShape& g, double bytes);
// The registered name of RCCL's all-pairs MSCCL program, whose launch adds links.json's
// msccl.base_latency to its protocol's base latency.
inline constexpr const char* kMscclAllPairs = "msccl_allpairs";

} // namespace stepsim
