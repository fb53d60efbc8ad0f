// A core header that reaches up into the engine: tools/layers/check_layers.cmake must refuse it
// (tests/CMakeLists.txt, layers_refuse_upward_include).
#pragma once
#include "sim/engine/replay.hpp"
