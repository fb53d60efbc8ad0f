#include "sim/output/gantt_svg.hpp"
#include "sim/output/html_page.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>

namespace stepsim {

namespace {

// Page geometry, in SVG pixels.
constexpr double kWidth     = 1600;
constexpr double kLeft      = 150; // row labels
constexpr double kRight     = 70;  // per-row bubble
constexpr double kPlotWidth = kWidth - kLeft - kRight;
constexpr double kRowsTop   = 92;

struct Span {
  double start, end;
};

// Overlapping spans, or spans closer than `join`, become one.
std::vector<Span> merged(std::vector<Span> spans, double join)
{
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  std::vector<Span> out;
  for (const Span& s : spans) {
    if (!out.empty() && s.start <= out.back().end + join)
      out.back().end = std::max(out.back().end, s.end);
    else
      out.push_back(s);
  }
  return out;
}

// The parts of [from, to] that no span of `cover` (merged, sorted) covers.
std::vector<Span> complement(const std::vector<Span>& cover, double from, double to)
{
  std::vector<Span> out;
  double at = from;
  for (const Span& c : cover) {
    if (c.start > at)
      out.push_back({at, std::min(c.start, to)});
    at = std::max(at, c.end);
    if (at >= to)
      break;
  }
  if (at < to)
    out.push_back({at, to});
  return out;
}

// The parts of the spans `a` (merged, sorted) that `b` (merged, sorted) does not cover.
std::vector<Span> uncovered(const std::vector<Span>& a, const std::vector<Span>& b)
{
  std::vector<Span> out;
  for (const Span& s : a)
    for (const Span& gap : complement(b, s.start, s.end))
      if (gap.end > gap.start)
        out.push_back(gap);
  return out;
}

double total(const std::vector<Span>& spans)
{
  double sum = 0;
  for (const Span& s : spans)
    sum += s.end - s.start;
  return sum;
}

// Names in the chart are escaped, and coordinates written, as the HTML pages write them.
using html::px;
std::string escaped(const std::string& text) { return html::escape(text); }

// Colour-blind-safe (Okabe–Ito) colours, one CSS class per pass.
struct PassStyle {
  Pass pass;
  const char* css;
  const char* colour;
  const char* legend;
};
constexpr PassStyle kPassStyles[] = {
    {Pass::Forward, "F", "#0072B2", "forward"},
    {Pass::Backward, "B", "#D55E00", "backward"},
    {Pass::BackwardInput, "Bi", "#E69F00", "backward (input)"},
    {Pass::BackwardWeight, "W", "#009E73", "backward (weight)"},
    {Pass::Recompute, "R", "#56B4E9", "recompute"},
    {Pass::Optimizer, "O", "#CC79A7", "optimizer"},
    {Pass::Other, "X", "#999999", "other"},
};

const PassStyle& style_of(Pass p)
{
  for (const auto& s : kPassStyles)
    if (s.pass == p)
      return s;
  return kPassStyles[std::size(kPassStyles) - 1];
}

// A tick step of 1, 2 or 5 × 10^k giving about `count` ticks over `span`.
double tick_step(double span, int count)
{
  double raw       = span / count;
  double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw)
      return m * magnitude;
  return 10 * magnitude;
}

template <typename... T>
void put(fmt::memory_buffer& out, fmt::format_string<T...> format, T&&... args)
{
  fmt::format_to(std::back_inserter(out), format, std::forward<T>(args)...);
}

} // namespace

std::string gantt_svg(const Timeline& t, const Report& r)
{
  const double step = t.step_time_s > 0 ? t.step_time_s : 1;
  const double pxs  = kPlotWidth / step; // pixels per second
  const double pixel = 1 / pxs;          // seconds per pixel

  // Rows in stage order; several ranks of one stage (full fidelity) share its group.
  std::vector<const TimelineRank*> rows;
  for (const auto& rank : t.ranks)
    rows.push_back(&rank);
  std::stable_sort(rows.begin(), rows.end(), [](const TimelineRank* a, const TimelineRank* b) {
    return a->stage != b->stage ? a->stage < b->stage : a->rank < b->rank;
  });
  const double n       = std::max<size_t>(rows.size(), 1);
  const double bar_h   = std::clamp(std::floor(640 / n), 4.0, 24.0);
  const double band_h  = std::max(2.0, std::round(bar_h / 4));
  const double pitch   = bar_h + band_h + std::max(2.0, std::round(bar_h / 3));
  const double stage_gap = rows.size() > static_cast<size_t>(t.stages) ? 6 : 0;
  const double rows_h  = pitch * n + stage_gap * t.stages;
  const double axis_y  = kRowsTop + rows_h + 4;
  const double height  = axis_y + 40;
  const double label_font = std::clamp(bar_h * 0.6, 7.0, 12.0);

  fmt::memory_buffer out;
  // Many small rectangles of one kind as one path: a fraction of the bytes of <rect> elements.
  auto spans_path = [&](fmt::memory_buffer& to, const char* css, const std::vector<Span>& spans, double top,
                        double h) {
    if (spans.empty())
      return;
    put(to, "<path class=\"{}\" d=\"", css);
    for (const Span& s : spans) {
      std::string w = px(std::max(0.3, (s.end - s.start) * pxs));
      put(to, "M{} {}h{}v{}h-{}z", px(kLeft + s.start * pxs), px(top), w, px(h), w);
    }
    put(to, "\"/>\n");
  };

  put(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, Arial, sans-serif\">\n",
      px(kWidth), px(height));
  put(out, "<style>\n");
  for (const auto& s : kPassStyles)
    put(out, ".{}{{fill:{}}}\n", s.css, s.colour);
  put(out, ".e{{stroke:#fff;stroke-width:0.6}}\n.c1{{fill-opacity:0.6}}\n"
      ".comm{{fill:#a8a8a8}}\n.exposed{{fill:#333}}\n.idle{{fill:url(#hatch)}}\n"
      ".mb{{font-size:{}px;fill:#fff;text-anchor:middle;pointer-events:none}}\n"
      ".label{{font-size:{}px;fill:#222}}\n.grid{{stroke:#e3e3e3;stroke-width:1}}\n.tick{{font-size:11px;fill:#444;"
      "text-anchor:middle}}\n</style>\n",
      px(std::min(9.0, bar_h * 0.6)), px(label_font));
  put(out, "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#fbe9e7\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#e57373\" stroke-width=\"2\"/></pattern></defs>\n");
  put(out, "<rect width=\"100%\" height=\"100%\" fill=\"#fff\"/>\n");

  // Title and subtitle.
  put(out, "<text x=\"{}\" y=\"24\" font-size=\"17\" font-weight=\"bold\" fill=\"#111\">{}: step {:.3f} s, bubble "
      "{:.1f}% (worst stage)</text>\n",
      px(kLeft), escaped(t.name), r.step_time_s, 100 * r.bubble_fraction);
  put(out, "<text x=\"{}\" y=\"43\" font-size=\"12\" fill=\"#444\">schedule {}, {} stages × {} micro-batches, {} GPUs "
      "({}), {:.0f} tokens/s, MFU {:.1f}%, {} fidelity</text>\n",
      px(kLeft), escaped(t.schedule), t.stages, t.micro_batches, r.gpus, escaped(r.device), r.tokens_per_s,
      100 * r.mfu, escaped(r.fidelity));

  // Legend: the passes that occur, then communication and bubble.
  std::vector<Pass> present;
  for (const auto& rank : t.ranks)
    for (const auto& i : rank.intervals)
      if (i.stream == Stream::Compute && std::find(present.begin(), present.end(), i.pass) == present.end())
        present.push_back(i.pass);
  double lx = kLeft;
  auto legend_item = [&](const std::string& swatch, const char* text) {
    put(out, "<g transform=\"translate({},58)\">{}<text x=\"18\" y=\"11\" font-size=\"12\" fill=\"#222\">{}</text></g>\n",
        px(lx), swatch, text);
    lx += 30 + 7.0 * std::string(text).size();
  };
  for (const auto& s : kPassStyles)
    if (std::find(present.begin(), present.end(), s.pass) != present.end())
      legend_item(fmt::format("<rect class=\"{}\" width=\"13\" height=\"13\"/>", s.css), s.legend);
  bool odd_chunks = false;
  for (const auto& rank : t.ranks)
    for (const auto& i : rank.intervals)
      odd_chunks = odd_chunks || (i.stream == Stream::Compute && i.chunk % 2 == 1);
  if (odd_chunks)
    legend_item("<rect class=\"F c1\" width=\"13\" height=\"13\"/>", "paler: chunks 1, 3, ...");
  legend_item("<rect class=\"comm\" y=\"4\" width=\"13\" height=\"5\"/>", "communication (hidden)");
  legend_item("<rect class=\"exposed\" y=\"4\" width=\"13\" height=\"5\"/>", "communication (exposed)");
  legend_item("<rect class=\"idle\" width=\"13\" height=\"13\" stroke=\"#e57373\" stroke-width=\"0.5\"/>",
              "bubble (idle)");

  // Grid and time axis.
  const double tick = tick_step(step, 10);
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(tick) + 1e-9)));
  put(out, "<g class=\"axis\">\n");
  for (int k = 0; k * tick <= step * (1 + 1e-9); ++k) {
    double x = kLeft + k * tick * pxs;
    put(out, "<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/><text class=\"tick\" x=\"{0}\" "
        "y=\"{3}\">{4:.{5}f} s</text>\n",
        px(x), px(kRowsTop - 4), px(axis_y + 5), px(axis_y + 18), k * tick, decimals);
  }
  put(out, "<line x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\" stroke=\"#444\"/>\n", px(kLeft), px(kLeft + kPlotWidth),
      px(axis_y));
  put(out, "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#444\" text-anchor=\"middle\">time in the step (s)</text>\n",
      px(kLeft + kPlotWidth / 2), px(axis_y + 34));
  put(out, "<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">bubble</text>\n</g>\n", px(kWidth - 8),
      px(kRowsTop - 6));

  // Rows, one group per stage.
  double y = kRowsTop;
  for (size_t k = 0; k < rows.size();) {
    const int stage = rows[k]->stage;
    put(out, "<g class=\"stage\" id=\"stage{}\">\n", stage);
    for (; k < rows.size() && rows[k]->stage == stage; ++k) {
      const TimelineRank& rank = *rows[k];
      std::vector<Span> compute, comm;
      for (const auto& i : rank.intervals)
        if (i.stream != Stream::Host) // CPU work: the GPU idles
          (i.stream == Stream::Compute ? compute : comm).push_back({i.start_s, i.end_s});
      compute = merged(std::move(compute), 0);
      comm    = merged(std::move(comm), 0);
      std::vector<Span> busy = compute;
      busy.insert(busy.end(), comm.begin(), comm.end());
      busy                       = merged(std::move(busy), 0);
      std::vector<Span> idle     = complement(busy, 0, step);
      const double idle_fraction = total(idle) / step;

      put(out, "<g transform=\"translate(0,{})\">\n", px(y));
      put(out, "<text class=\"label\" x=\"8\" y=\"{}\">stage {} · rank {}</text>\n", px(bar_h * 0.5 + label_font * 0.35),
          rank.stage, rank.rank);
      put(out, "<text class=\"label\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{:.1f}%</text>\n", px(kWidth - 8),
          px(bar_h * 0.5 + label_font * 0.35), 100 * idle_fraction);

      // Idle time under the bars; slivers under half a pixel are not drawn (the row's percentage
      // counts them).
      std::vector<Span> visible_idle;
      for (const Span& s : idle)
        if ((s.end - s.start) * pxs >= 0.5)
          visible_idle.push_back(s);
      spans_path(out, "idle", visible_idle, 0, bar_h);

      // Compute bars, one per run (see compute_runs); odd chunks of an interleaved schedule are
      // paler; the recomputed forward inside a backward run is a strip on the bar's upper part.
      const std::vector<ComputeRun> runs = compute_runs(rank);
      put(out, "<g class=\"bars\">\n");
      for (const ComputeRun& b : runs) {
        const PassStyle& st = style_of(b.pass);
        const double x = kLeft + b.start_s * pxs, w = std::max(0.3, (b.end_s - b.start_s) * pxs);
        std::string what = b.micro_batch >= 0
                               ? fmt::format("{} mb{} chunk{}", pass_name(b.pass), b.micro_batch, b.chunk)
                               : std::string(pass_name(b.pass));
        if (b.recompute_s > 0 && b.pass != Pass::Recompute)
          what += fmt::format(" (recompute {:.4f} s)", b.recompute_s);
        // A white edge separates neighbouring bars, where a bar is wide enough to keep its colour.
        put(out, "<rect class=\"{}{}{}\" x=\"{}\" width=\"{}\" height=\"{}\"><title>{}: {:.4f}–{:.4f} s</title></rect>\n",
            st.css, b.chunk % 2 == 1 ? " c1" : "", w >= 5 ? " e" : "", px(x), px(w), px(bar_h), what, b.start_s,
            b.end_s);
      }
      put(out, "</g>\n");
      std::vector<Span> recomputed;
      for (const ComputeRun& b : runs)
        if (b.pass != Pass::Recompute && b.recompute_s > 0)
          for (size_t k = b.first; k <= b.last; ++k)
            if (rank.intervals[k].pass == Pass::Recompute)
              recomputed.push_back({rank.intervals[k].start_s, rank.intervals[k].end_s});
      spans_path(out, "R", merged(std::move(recomputed), pixel / 2), 0, std::round(bar_h * 0.4));
      // Micro-batch numbers where a bar is wide enough to hold them.
      const double digit_w = std::min(9.0, bar_h * 0.6) * 0.62;
      for (const ComputeRun& b : runs) {
        if (b.micro_batch < 0 || bar_h < 9)
          continue;
        std::string text = std::to_string(b.micro_batch);
        const double w   = (b.end_s - b.start_s) * pxs;
        if (w < digit_w * text.size() + 1.5)
          continue;
        put(out, "<text class=\"mb\" x=\"{}\" y=\"{}\">{}</text>\n", px(kLeft + (b.start_s + b.end_s) / 2 * pxs),
            px(bar_h * 0.5 + std::min(9.0, bar_h * 0.6) * 0.36 + (b.recompute_s > 0 ? bar_h * 0.2 : 0)), text);
      }

      // The communication band under the bar: darker where compute does not hide it.
      const std::vector<Span> exposed = uncovered(comm, compute);
      spans_path(out, "comm", merged(comm, pixel / 2), bar_h + 1, band_h);
      spans_path(out, "exposed", merged(exposed, pixel / 2), bar_h + 1, band_h);
      put(out, "</g>\n");
      y += pitch;
    }
    put(out, "</g>\n");
    y += stage_gap;
  }
  put(out, "</svg>\n");
  return fmt::to_string(out);
}

} // namespace stepsim
