// Import of a HuggingFace `config.json` (Llama, Mistral/Mixtral, Qwen2, GPT-2 families) into the
// model fields of the scenario contract.
#pragma once

#include "sim/core/scenario.hpp"

namespace stepsim {

// Throws InputError naming the config key that is missing or of the wrong type; a mixture of
// experts (mixtral, qwen2_moe with its shared expert, qwen3_moe) must name its expert fields in full.
ModelSpec import_hf_config(const nlohmann::json& config);

} // namespace stepsim
