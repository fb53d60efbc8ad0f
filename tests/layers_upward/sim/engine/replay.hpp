#pragma once
#include "sim/core/scenario.hpp" // downward: allowed
