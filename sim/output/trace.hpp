// The timeline as Chrome/Perfetto trace-event JSON (open it in https://ui.perfetto.dev or
// chrome://tracing): one process per simulated rank, named "rank R (stage S)"; one thread per
// stream (compute, tensor, data, send_next, ...); one complete event ("X") per task, named like
// its work ("mlp_forward") or collective, with pass, micro-batch and, for communication, bytes and
// peer or group; each pass of a micro-batch is one slice ("F mb3 chunk0") holding its tasks;
// one flow arrow (a "s"/"f" pair with one id) from each send to its matching receive.
// Timestamps are microseconds. Same timeline → byte-identical text.
#pragma once

#include "sim/output/timeline.hpp"

#include <string>

namespace stepsim {

std::string trace_json(const Timeline& timeline);

} // namespace stepsim
