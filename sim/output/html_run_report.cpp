#include "sim/output/html_run_report.hpp"

#include "sim/output/gantt_svg.hpp"
#include "sim/output/html_page.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>

namespace stepsim {

namespace {

using html::escape;

template <typename... T>
void put(std::string& out, fmt::format_string<T...> format, T&&... args)
{
  fmt::format_to(std::back_inserter(out), format, std::forward<T>(args)...);
}

// A parameter count in billions or millions, as model cards write them.
std::string count(double n)
{
  if (n >= 1e9)
    return fmt::format("{:.2f} B", n / 1e9);
  if (n >= 1e6)
    return fmt::format("{:.2f} M", n / 1e6);
  return fmt::format("{:.0f}", n);
}

// An energy in the unit that fits: a small job's step takes joules, a large one's megajoules.
std::string energy(double joules)
{
  if (joules >= 1e6)
    return fmt::format("{:.3f} MJ", joules / 1e6);
  if (joules >= 1e3)
    return fmt::format("{:.3f} kJ", joules / 1e3);
  if (joules >= 1)
    return fmt::format("{:.3f} J", joules);
  return fmt::format("{:.3f} mJ", joules * 1e3);
}

void card(std::string& out, const std::string& value, const std::string& what, bool bad = false)
{
  put(out, "<div class=\"h-card{}\"><b>{}</b><span>{}</span></div>\n", bad ? " h-bad" : "", escape(value), escape(what));
}

void row(std::string& out, const std::string& what, const std::string& value)
{
  put(out, "<tr><td>{}</td><td>{}</td></tr>\n", escape(what), escape(value));
}

std::string summary(const Report& r)
{
  std::string out = "<section id=\"summary\">\n<h2>Summary</h2>\n<div class=\"h-cards\">\n";
  card(out, html::fixed(r.step_time_s, 4) + " s", "step time");
  card(out, html::grouped(r.tokens_per_s), "tokens/s");
  card(out, html::fixed(r.samples_per_s, 2), "samples/s");
  card(out, html::percent(r.mfu), "MFU");
  card(out, html::fixed(r.model_tflops_per_gpu, 1), "model TFLOP/s per GPU");
  card(out, html::percent(r.bubble_fraction), "bubble (worst stage)");
  card(out, html::fixed(r.exposed_comm_s, 4) + " s", "exposed communication");
  card(out, html::gib(r.memory_peak_bytes),
       // The device only where the peak's is not the job's (mixed node groups).
       fmt::format("memory peak per GPU (of {}{}, {})", html::gib(r.memory_capacity_bytes),
                   r.memory_peak_device.empty() || r.memory_peak_device == r.device ? "" : " on " + r.memory_peak_device,
                   r.fits_in_memory ? "fits" : "DOES NOT FIT"),
       !r.fits_in_memory);
  if (r.energy_j_per_token > 0)
    card(out, energy(r.energy_j_per_token), "energy per token");
  out += "</div>\n<table class=\"h-kv\">\n";
  if (r.parameters > 0)
    row(out, "parameters",
        count(r.parameters) + (r.active_parameters < r.parameters ? " (" + count(r.active_parameters) + " active)" : ""));
  row(out, "hardware TFLOP/s per GPU", html::fixed(r.hardware_tflops_per_gpu, 1) + " (HFU " + html::percent(r.hfu) + ")");
  row(out, "communication", html::fixed(r.comm_s, 4) + " s, of which exposed " + html::fixed(r.exposed_comm_s, 4) +
                                " s (overlap " + html::percent(r.overlap) + ")");
  row(out, "interference",
      r.comm_compute_interference > 0
          ? fmt::format("f = {:.3g}: compute at {:.0f}% of its speed beside a collective", r.comm_compute_interference,
                        100 * (1 - r.comm_compute_interference))
          : "off");
  std::string algorithms;
  for (const auto& [op, name] : r.collective_algorithms) // a std::map: in name order
    if (!name.empty())
      algorithms += (algorithms.empty() ? "" : ", ") + op + " " + name;
  if (!algorithms.empty())
    row(out, "collective algorithms", algorithms);
  if (r.energy_j_per_step > 0)
    row(out, "energy per step", energy(r.energy_j_per_step));
  row(out, "memory of the peak GPU",
      fmt::format("weights {}, gradients {}, optimizer {}, activations {}, buffers {}", html::gib(r.memory.weights),
                  html::gib(r.memory.gradients), html::gib(r.memory.optimizer), html::gib(r.memory.activations),
                  html::gib(r.memory.buffers)));
  row(out, "simulated", fmt::format("{} ranks, {} activities", r.simulated_ranks, r.activities));
  if (!r.full_fidelity_reason.empty())
    row(out, "ran at full fidelity", r.full_fidelity_reason);
  if (r.shadows.short_changed_links > 0)
    row(out, "peers' traffic replayed",
        fmt::format("{} shadow transfers on {} shared links", r.shadows.flows, r.shadows.short_changed_links));
  out += "</table>\n</section>\n";
  return out;
}

std::string stage_table(const Report& r)
{
  bool mixed = false;
  for (const auto& s : r.stages)
    mixed = mixed || s.device != r.stages.front().device;
  std::string out = "<section id=\"stages\">\n<h2>Stages</h2>\n";
  if (r.stages.empty())
    return out + "<p class=\"h-note\">This report has no pipeline stages.</p>\n</section>\n";
  out += "<div class=\"h-scroll\"><table class=\"h-t\">\n<thead><tr><th>stage</th><th>rank</th><th>layers</th>"
         "<th>compute s</th><th>comm s</th><th>exposed s</th><th>bubble</th><th>textbook bubble</th><th>memory</th>";
  if (mixed)
    out += "<th class=\"h-l\">device</th>";
  out += "</tr></thead>\n<tbody>\n";
  for (const auto& s : r.stages) {
    const bool over = r.memory_capacity_bytes > 0 && s.memory_bytes > r.memory_capacity_bytes;
    // The stage number links to its rows of the Gantt chart (gantt_svg's <g id="stageN">).
    put(out, "<tr><td><a href=\"#stage{0}\">{0}</a></td><td>{1}</td><td>{2}</td><td>{3}</td><td>{4}</td><td>{5}</td>"
        "<td>{6}</td><td>{7}</td><td{8}>{9}</td>",
        s.stage, s.rank, s.layers, html::fixed(s.compute_s, 4), html::fixed(s.comm_s, 4), html::fixed(s.exposed_comm_s, 4),
        html::percent(s.bubble_fraction), html::percent(s.textbook_bubble_fraction), over ? " class=\"h-warn\"" : "",
        html::gib(s.memory_bytes));
    if (mixed)
      put(out, "<td class=\"h-l\">{}</td>", escape(s.device));
    out += "</tr>\n";
  }
  return out + "</tbody></table></div>\n</section>\n";
}

std::string timeline_section(const Report& r, const Timeline* t)
{
  std::string out = "<section id=\"timeline\">\n<h2>Timeline of the step</h2>\n";
  if (t == nullptr || t->ranks.empty())
    return out + "<p class=\"h-note\">No timeline was recorded for this report.</p>\n</section>\n";
  out += "<div class=\"h-scroll h-gantt\">\n" + gantt_svg(*t, r) + "</div>\n";
  out += "<p class=\"h-note\">One row per simulated rank; hover a bar for its pass, micro-batch and times. "
         "The same chart as <code>--svg</code>.</p>\n</section>\n";
  return out;
}

// Colour-blind-safe (Okabe–Ito) colours for the parts of a GPU's memory.
struct Part {
  const char* name;
  const char* colour;
  double MemoryBreakdown::*bytes;
};
constexpr Part kParts[] = {
    {"weights", "#0072B2", &MemoryBreakdown::weights},         {"gradients", "#E69F00", &MemoryBreakdown::gradients},
    {"optimizer", "#009E73", &MemoryBreakdown::optimizer},     {"activations", "#D55E00", &MemoryBreakdown::activations},
    {"buffers", "#CC79A7", &MemoryBreakdown::buffers},
};
constexpr const char* kStageTotal = "#8da9c4";

// Horizontal bars on one scale: the peak GPU's parts stacked, then each stage's total (the
// report breaks down the peak GPU only), and the capacity as a dashed line across them.
std::string memory_section(const Report& r)
{
  constexpr double width = 1100, left = 170, right = 110, top = 30, bar = 20, gap = 8;
  const double plot = width - left - right;
  double biggest    = r.memory.total();
  for (const auto& s : r.stages)
    biggest = std::max(biggest, s.memory_bytes);
  const double gib   = 1024.0 * 1024 * 1024;
  const double scale = std::max({biggest, r.memory_capacity_bytes, 1.0}) * 1.04 / gib; // GiB across the plot
  const double xpg   = plot / scale;                                                    // pixels per GiB
  const size_t rows  = 1 + r.stages.size();
  const double axis_y = top + rows * (bar + gap) + 2;
  const double height = axis_y + 38;

  std::string out = "<section id=\"memory\">\n<h2>Memory per GPU</h2>\n";
  put(out, "<svg class=\"h-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"memory per GPU against its capacity\">\n",
      html::px(width), html::px(height));
  const double tick = html::tick_step(scale, 8);
  for (int k = 0; k * tick <= scale * (1 + 1e-9); ++k) {
    const double x = left + k * tick * xpg;
    put(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#e6e8ec\"/>"
        "<text x=\"{0}\" y=\"{3}\" font-size=\"11\" fill=\"#5b6472\" text-anchor=\"middle\">{4:g}</text>\n",
        html::px(x), html::px(top - 4), html::px(axis_y), html::px(axis_y + 15), k * tick);
  }
  put(out, "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#5b6472\" text-anchor=\"middle\">GiB per GPU</text>\n",
      html::px(left + plot / 2), html::px(axis_y + 32));

  auto label = [&](double y, const std::string& text) {
    put(out, "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#1d2330\" text-anchor=\"end\">{}</text>\n",
        html::px(left - 8), html::px(y + bar / 2 + 4), escape(text));
  };
  auto value = [&](double x, double y, double bytes, bool over) {
    put(out, "<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"{}\">{}</text>\n", html::px(x + 6),
        html::px(y + bar / 2 + 4), over ? "#c62828" : "#1d2330", html::gib(bytes));
  };
  const double capacity = r.memory_capacity_bytes;
  double y = top;
  label(y, r.stages.size() > 1 ? fmt::format("peak GPU (stage {})", r.memory_peak_stage) : std::string("peak GPU"));
  double x = left;
  for (const Part& p : kParts) {
    const double b = r.memory.*p.bytes;
    if (b <= 0)
      continue;
    put(out, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>{}: {}</title></rect>\n",
        html::px(x), html::px(y), html::px(b / gib * xpg), html::px(bar), p.colour, p.name, html::gib(b));
    x += b / gib * xpg;
  }
  value(x, y, r.memory.total(), capacity > 0 && r.memory.total() > capacity);
  for (const auto& s : r.stages) {
    y += bar + gap;
    const bool over = capacity > 0 && s.memory_bytes > capacity;
    label(y, fmt::format("stage {}", s.stage));
    put(out, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"><title>stage {}: {}</title></rect>\n",
        html::px(left), html::px(y), html::px(s.memory_bytes / gib * xpg), html::px(bar), over ? "#c62828" : kStageTotal,
        s.stage, html::gib(s.memory_bytes));
    value(left + s.memory_bytes / gib * xpg, y, s.memory_bytes, over);
  }
  if (capacity > 0) {
    const double cx = left + capacity / gib * xpg;
    put(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#c62828\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"5 4\"/><text x=\"{0}\" y=\"{3}\" font-size=\"12\" fill=\"#c62828\" "
        "text-anchor=\"middle\">capacity {4}</text>\n",
        html::px(cx), html::px(top - 10), html::px(axis_y), html::px(top - 14), html::gib(capacity));
  }
  out += "</svg>\n<div class=\"h-legend\">";
  for (const Part& p : kParts)
    put(out, "<span><i style=\"background:{}\"></i>{}</span>", p.colour, p.name);
  put(out, "<span><i style=\"background:{}\"></i>stage total</span></div>\n", kStageTotal);
  out += "<p class=\"h-note\">The report breaks down the memory of the peak GPU; for the other stages it gives "
         "the total.";
  bool mixed = false;
  for (const auto& s : r.stages)
    mixed = mixed || s.device != r.stages.front().device;
  if (mixed) // the report has one capacity: the device's that holds the peak
    put(out, " The capacity is that of {}, which holds the peak; stages on other GPU types have their own "
        "(see the stage table).",
        escape(r.memory_peak_device.empty() ? r.device : r.memory_peak_device));
  out += "</p>\n</section>\n";
  return out;
}

std::string links_section(const Report& r)
{
  std::string out = "<section id=\"links\">\n<h2>Busiest links</h2>\n";
  if (r.links.empty())
    out += "<p class=\"h-note\">No link carried simulated traffic (or links were not recorded).</p>\n";
  else {
    out += "<div class=\"h-scroll\"><table class=\"h-t\">\n<thead><tr><th class=\"h-l\">link</th><th>GB carried</th>"
           "<th>busy s</th><th class=\"h-l\">busy (of the step)</th></tr></thead>\n<tbody>\n";
    for (const auto& l : r.links)
      put(out, "<tr><td class=\"h-l\">{}</td><td>{}</td><td>{}</td><td class=\"h-l\"><span class=\"h-bar\" "
          "style=\"width:{}px\"></span> {}</td></tr>\n",
          escape(l.name), html::fixed(l.bytes / 1e9, 3), html::fixed(l.busy_s, 6),
          html::px(160 * std::clamp(l.busy_fraction, 0.0, 1.0)), html::percent(l.busy_fraction));
    out += "</tbody></table></div>\n";
  }
  if (!r.waits.empty()) {
    const size_t shown = std::min<size_t>(r.waits.size(), 10);
    put(out, "<h2 style=\"margin-top:16px\">Who waited for whom (the {} longest)</h2>\n", shown);
    out += "<div class=\"h-scroll\"><table class=\"h-t\">\n<thead><tr><th>rank</th><th>on rank</th>"
           "<th class=\"h-l\">group</th><th>waited s</th></tr></thead>\n<tbody>\n";
    for (size_t i = 0; i < shown; ++i) {
      const auto& w = r.waits[i];
      put(out, "<tr><td>{}</td><td>{}</td><td class=\"h-l\">{}</td><td>{}</td></tr>\n", w.rank, w.peer,
          escape(w.group.empty() ? "(send/recv)" : w.group), html::fixed(w.seconds, 6));
    }
    out += "</tbody></table></div>\n";
  }
  return out + "</section>\n";
}

} // namespace

std::string html_run_report(const Report& r, const Timeline* timeline)
{
  std::string body;
  put(body, "<h1>{}</h1>\n<p class=\"h-sub\">{} GPUs ({}), schedule {}, {} micro-batches per replica, {} fidelity, "
      "{} network, framework {}</p>\n",
      escape(r.name), r.gpus, escape(r.device), escape(r.schedule), r.micro_batches, escape(r.fidelity),
      escape(r.network_fidelity), escape(r.framework));
  // Everything else the report holds (input pipeline, checkpoints) as the terminal prints it; a
  // federated round, which has no stages or pipeline, is all there: first and open.
  const std::string text = std::string("<section id=\"text\">\n<details") + (r.federated ? " open" : "") +
                           "><summary>The report as <code>stepsim run</code> prints it</summary>\n<pre>" +
                           escape(to_table(r)) + "</pre></details>\n</section>\n";
  if (r.federated)
    body += text;
  body += summary(r);
  body += stage_table(r);
  body += timeline_section(r, timeline);
  body += memory_section(r);
  body += links_section(r);
  if (!r.federated)
    body += text;
  body += html::json_script("stepsim-report", to_json(r));
  // Reading the embedded report back checks that it survived its escaping.
  const std::string script = "const report = JSON.parse(document.getElementById('stepsim-report').textContent);\n"
                             "if (typeof report.step_time_s !== 'number') throw new Error('report data unreadable');\n";
  const std::string css = ".h-gantt svg{display:block;max-width:100%;height:auto}\n"
                          "pre{font-size:12px;overflow-x:auto}\nsummary{cursor:pointer;font-weight:600}\n";
  return html::page(r.name + " — stepsim", body, css, script);
}

} // namespace stepsim
