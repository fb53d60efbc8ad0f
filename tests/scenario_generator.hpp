// Random scenarios for the property tests (tests/test_properties.cpp, issue 23): valid ones drawn
// from the shapes users run (GPT-style models on NVSwitch nodes and a fat-tree, with tensor,
// pipeline and data parallelism, ZeRO, recompute and the 1F1B and GPipe schedules), and mutations
// of them that may be anything. Both are functions of a seed alone, so a failing case is
// reproduced from the seed its test prints.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace stepsim::testing {

// A valid scenario, small enough to replay in well under a second.
nlohmann::json random_scenario(uint64_t seed);

// A pipeline whose stages do the same work: a layer list of one block repeated on every stage,
// no embedding or head, so that the only idle time the schedule adds is its fill and drain.
nlohmann::json random_balanced_pipeline(uint64_t seed);

// The scenario with one value changed, removed or added at a random place: a wrong type, a
// negative, zero, huge or non-finite number, an empty or unknown string, null, a deep or empty
// container. `what` receives the path and the change, for the failure message.
nlohmann::json mutate(const nlohmann::json& scenario, uint64_t seed, std::string* what);

// The seed of case `index` under the base seed: $STEPSIM_PROPERTY_SEED when set, else a fixed one,
// so that `make test` is deterministic and a failure is replayed by exporting the printed seed.
uint64_t property_seed(int index);
uint64_t property_base_seed();

} // namespace stepsim::testing
