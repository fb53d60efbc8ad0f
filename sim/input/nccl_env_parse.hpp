// Reads platform.nccl_env: NCCL's environment variables as a platform's software image sets them,
// in NCCL's own syntax (sim/core/nccl_env.hpp).
#pragma once

#include "sim/core/nccl_env.hpp"
#include "sim/input/json_reader.hpp"

#include <string>
#include <vector>

namespace stepsim {

// The variables platform.nccl_env may set, in the order messages list them.
const std::vector<std::string>& nccl_env_variables();

// Reads the object under `platform`'s "nccl_env" (absent: NCCL's defaults) into `env`, each
// problem reported at its path (platform.nccl_env.NCCL_ALGO: ...).
void read_nccl_env(JsonReader& platform, NcclEnv& env);

} // namespace stepsim
