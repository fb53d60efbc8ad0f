// The step as a Gantt chart in SVG: one group per pipeline stage, one row per simulated rank of
// that stage. Compute passes (forward, backward, backward-input, backward-weight, recompute,
// optimizer) are bars in distinct colours, labelled with their micro-batch where they are wide
// enough; communication is a thinner band under each row (darker where compute does not hide
// it); idle time — the bubble — is hatched. A time axis in seconds, a legend, and a title with the
// scenario, step time and worst-stage bubble frame it; each row ends with its rank's bubble.
//
// To keep the file small at 16 stages × 200 micro-batches, consecutive compute tasks of one pass
// of one micro-batch become one bar (the gaps between them are the tensor-parallel collectives
// the band shows), and bands and hatching are merged at the resolution of one pixel.
#pragma once

#include "sim/core/report.hpp"
#include "sim/output/timeline.hpp"

#include <string>

namespace stepsim {

std::string gantt_svg(const Timeline& timeline, const Report& report);

} // namespace stepsim
