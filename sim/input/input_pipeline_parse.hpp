// Reads training.input (the data loader) and training.checkpoint, and checks them against the
// platform they need (CPU cores, local disks, shared storage).
#pragma once

#include "sim/core/scenario.hpp"
#include "sim/input/json_reader.hpp"

namespace stepsim {

// `r` is the training object; absent keys leave the features off.
void read_input_pipeline(JsonReader& r, InputPipelineSpec& input);
void read_checkpoint(JsonReader& r, CheckpointSpec& checkpoint);
// What the two need of the platform, named by the platform's paths.
void check_input_and_checkpoint(const Scenario& s, Problems& problems);

} // namespace stepsim
