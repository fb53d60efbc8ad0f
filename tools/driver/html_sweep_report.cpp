#include "tools/driver/html_sweep_report.hpp"

#include "sim/output/html_page.hpp"
#include "tools/driver/sweep.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <regex>
#include <set>

namespace stepsim {

namespace {

using html::escape;
using html::px;

template <typename... T>
void put(std::string& out, fmt::format_string<T...> format, T&&... args)
{
  fmt::format_to(std::back_inserter(out), format, std::forward<T>(args)...);
}

// The CSV that sweep_csv writes, read back into cells: the table is that file's rows and columns
// by construction, rather than by a second copy of its column rules. RFC 4180: a quoted field may
// hold commas, doubled quotes and line breaks.
std::vector<std::vector<std::string>> parse_csv(const std::string& text)
{
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"')
        field += text[++i];
      else if (c == '"')
        quoted = false;
      else
        field += c;
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
    } else if (c == '\n') {
      row.push_back(std::move(field));
      field.clear();
      rows.push_back(std::move(row));
      row.clear();
      any = false;
    } else if (c != '\r') {
      field += c;
      any = true;
    }
  }
  if (any || !field.empty() || !row.empty()) {
    row.push_back(std::move(field));
    rows.push_back(std::move(row));
  }
  return rows;
}

bool is_number(const std::string& s)
{
  if (s.empty())
    return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// "path=value, path=value" of a result's parameters (an object: in key order).
std::string parameters_text(const nlohmann::json& result)
{
  std::string out;
  // Appended piece by piece: GCC 12 warns falsely on "," + std::string temporaries.
  const nlohmann::json parameters = result.value("parameters", nlohmann::json::object()); // items() keeps a reference
  for (const auto& [path, value] : parameters.items()) {
    if (!out.empty())
      out += ", ";
    out += path;
    out += '=';
    out += value.is_string() ? value.get<std::string>() : value.dump();
  }
  return out;
}

struct Dot {
  size_t point = 0;
  double x = 0, y = 0;
  std::string tip;
  bool front = false;
};

// Marks the points no other point beats on both axes: less x (memory, energy) and more y
// (throughput). Sorted by x, then by y from the top, a point is on the front when it is above
// every point before it.
void mark_front(std::vector<Dot>& dots)
{
  std::vector<Dot*> order;
  for (auto& d : dots)
    order.push_back(&d);
  std::stable_sort(order.begin(), order.end(), [](const Dot* a, const Dot* b) {
    return a->x != b->x ? a->x < b->x : a->y > b->y;
  });
  double best = -1;
  for (Dot* d : order)
    if (d->y > best) {
      d->front = true;
      best     = d->y;
    }
}

// An axis range around [lo, hi] with a margin, its lower end on a tick (and not below 0): the
// points of a sweep often differ by a few percent, which an axis from 0 would flatten.
struct Range {
  double lo, hi, step;
};
Range range_of(double lo, double hi, int ticks)
{
  if (!(hi > lo))
    return {0, hi > 0 ? hi * 1.1 : 1, html::tick_step(hi > 0 ? hi * 1.1 : 1, ticks)};
  const double margin = 0.06 * (hi - lo);
  const double step   = html::tick_step(hi - lo + 2 * margin, ticks);
  const double from   = std::max(0.0, std::floor((lo - margin) / step) * step);
  return {from, hi + margin, step};
}

// A scatter plot of `dots` (x in the unit `x_label` names, y in tokens/s) with the front joined
// as a staircase; `limit` > 0 draws the device capacity as a dashed vertical line when it is
// near the points, and names it under the axis otherwise.
std::string pareto_svg(const std::vector<Dot>& dots, std::string x_label, double limit, const std::string& limit_label)
{
  constexpr double width = 1100, height = 480, left = 90, right = 30, top = 24, bottom = 56;
  const double plot_w = width - left - right, plot_h = height - top - bottom;
  double xlo = dots.empty() ? 0 : dots.front().x, xhi = xlo, ylo = dots.empty() ? 0 : dots.front().y, yhi = ylo;
  for (const auto& d : dots) {
    xlo = std::min(xlo, d.x), xhi = std::max(xhi, d.x);
    ylo = std::min(ylo, d.y), yhi = std::max(yhi, d.y);
  }
  const bool limit_shown = limit > 0 && limit <= 1.5 * xhi; // further off, it would squeeze the points
  if (limit_shown)
    xhi = std::max(xhi, limit);
  else if (limit > 0)
    x_label += " — " + limit_label + ", off the chart";
  const Range xr = range_of(xlo, xhi, 10), yr = range_of(ylo, yhi, 8);
  auto X = [&](double v) { return left + (v - xr.lo) / (xr.hi - xr.lo) * plot_w; };
  auto Y = [&](double v) { return top + plot_h - (v - yr.lo) / (yr.hi - yr.lo) * plot_h; };

  std::string out;
  put(out, "<svg class=\"h-chart\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"tokens/s against {2}\">\n",
      px(width), px(height), escape(x_label));
  // Ticks counted from the range's start (a multiple of the step), so that sums do not drift.
  for (int k = 0; xr.lo + k * xr.step <= xr.hi; ++k) {
    const double v = xr.lo + k * xr.step;
    put(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#e6e8ec\"/><text x=\"{0}\" y=\"{3}\" "
        "font-size=\"11\" fill=\"#5b6472\" text-anchor=\"middle\">{4:g}</text>\n",
        px(X(v)), px(top), px(top + plot_h), px(top + plot_h + 16), v);
  }
  for (int k = 0; yr.lo + k * yr.step <= yr.hi; ++k) {
    const double v = yr.lo + k * yr.step;
    put(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#e6e8ec\"/><text x=\"{3}\" y=\"{4}\" "
        "font-size=\"11\" fill=\"#5b6472\" text-anchor=\"end\">{5}</text>\n",
        px(left), px(Y(v)), px(left + plot_w), px(left - 6), px(Y(v) + 4), html::grouped(v));
  }
  put(out, "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#b8bec8\"/>\n", px(left), px(top),
      px(plot_w), px(plot_h));
  put(out, "<text x=\"{}\" y=\"{}\" font-size=\"13\" fill=\"#1d2330\" text-anchor=\"middle\">{}</text>\n",
      px(left + plot_w / 2), px(height - 12), escape(x_label));
  put(out, "<text transform=\"translate(18,{}) rotate(-90)\" font-size=\"13\" fill=\"#1d2330\" "
      "text-anchor=\"middle\">tokens/s</text>\n",
      px(top + plot_h / 2));
  if (limit_shown)
    put(out, "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#c62828\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"5 4\"/><text x=\"{3}\" y=\"{4}\" font-size=\"12\" fill=\"#c62828\" "
        "text-anchor=\"end\">{5}</text>\n",
        px(X(limit)), px(top), px(top + plot_h), px(X(limit) - 5), px(top + plot_h - 8), escape(limit_label));

  std::vector<const Dot*> front;
  for (const auto& d : dots)
    if (d.front)
      front.push_back(&d);
  std::stable_sort(front.begin(), front.end(), [](const Dot* a, const Dot* b) { return a->x < b->x; });
  if (!front.empty()) {
    put(out, "<path fill=\"none\" stroke=\"#D55E00\" stroke-width=\"1.5\" d=\"M{} {}", px(X(front[0]->x)),
        px(Y(front[0]->y)));
    for (size_t i = 1; i < front.size(); ++i)
      put(out, "H{}V{}", px(X(front[i]->x)), px(Y(front[i]->y)));
    out += "\"/>\n";
  }
  // The others first, so that the front is drawn over them; each dot links to its table row.
  for (int pass = 0; pass < 2; ++pass)
    for (const auto& d : dots)
      if (d.front == (pass == 1))
        put(out, "<a href=\"#point-{}\"><circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" fill-opacity=\"{}\" "
            "stroke=\"#fff\" stroke-width=\"0.8\"><title>{}</title></circle></a>\n",
            d.point, px(X(d.x)), px(Y(d.y)), d.front ? "6" : "4", d.front ? "#D55E00" : "#0072B2",
            d.front ? "1" : "0.55", escape(d.tip));
  // Point numbers beside the front, each where it does not overlap one already written (the
  // others are in the list under the plot and in each dot's tooltip).
  struct Box {
    double x, y, w;
  };
  std::vector<Box> labels;
  for (const Dot* d : front) {
    const double lx = X(d->x) + 8, ly = Y(d->y) - 7;
    const double lw = 7.0 * static_cast<double>(std::to_string(d->point).size());
    bool clear      = true;
    for (const Box& o : labels)
      clear = clear && (std::fabs(ly - o.y) >= 12 || lx >= o.x + o.w + 4 || lx + lw + 4 <= o.x);
    if (!clear)
      continue;
    labels.push_back({lx, ly, lw});
    put(out, "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#8a3a00\">{}</text>\n", px(lx), px(ly), d->point);
  }
  out += "</svg>\n";
  return out;
}

} // namespace

std::string html_sweep_report(const std::string& name, const std::vector<std::string>& axes,
                              const std::vector<nlohmann::json>& results)
{
  const auto csv = parse_csv(sweep_csv(axes, results));
  const std::vector<std::string> header = csv.empty() ? std::vector<std::string>{} : csv.front();

  // The plotted points: those simulated, with their figures.
  const double gib = 1024.0 * 1024 * 1024;
  std::vector<Dot> memory, energy;
  std::vector<const nlohmann::json*> excluded;
  double capacity = 0;
  size_t ok = 0, infeasible = 0, failed = 0;
  const nlohmann::json* best = nullptr;
  for (const auto& r : results) {
    const std::string status = r.value("status", std::string());
    infeasible += status == "infeasible";
    failed += status == "error";
    if (status != "ok" || !r.contains("report") || !r["report"].is_object()) {
      excluded.push_back(&r);
      continue;
    }
    ++ok;
    const auto& rep         = r["report"];
    const size_t point      = r.value("point", size_t{0});
    const double throughput = rep.value("tokens_per_s", 0.0);
    const double bytes      = rep.value("memory_peak_bytes", 0.0);
    const double joules     = rep.value("energy_j_per_token", 0.0);
    capacity = std::max(capacity, rep.value("memory_capacity_bytes", 0.0));
    if (best == nullptr || throughput > (*best)["report"].value("tokens_per_s", 0.0))
      best = &r;
    const std::string tip = fmt::format("point {}: {} tokens/s, {} per GPU, {:.3f} J per token{}\n{}", point,
                                        html::grouped(throughput), html::gib(bytes), joules,
                                        rep.value("fits_in_memory", true) ? "" : " (does not fit)", parameters_text(r));
    memory.push_back({point, bytes / gib, throughput, tip});
    if (joules > 0)
      energy.push_back({point, joules, throughput, tip});
  }
  mark_front(memory);
  mark_front(energy);
  std::vector<size_t> memory_front, energy_front;
  for (const auto& d : memory)
    if (d.front)
      memory_front.push_back(d.point);
  for (const auto& d : energy)
    if (d.front)
      energy_front.push_back(d.point);

  std::string body;
  put(body, "<h1>Sweep {}</h1>\n<p class=\"h-sub\">{} points: {} simulated, {} infeasible, {} failed", escape(name),
      results.size(), ok, infeasible, failed);
  if (best != nullptr)
    put(body, "; the most tokens/s: <a href=\"#point-{0}\">point {0}</a> ({1})", (*best).value("point", size_t{0}),
        escape(parameters_text(*best)));
  body += "</p>\n";

  // The Pareto plot, in two versions shown one at a time (the memory one without JavaScript).
  body += "<section id=\"pareto\">\n<h2>Throughput against cost</h2>\n<div class=\"h-toggle\" role=\"group\">"
          "<button type=\"button\" data-plot=\"memory\" aria-pressed=\"true\">memory per GPU</button>"
          "<button type=\"button\" data-plot=\"energy\" aria-pressed=\"false\">energy per token</button></div>\n";
  auto front_list = [](const std::vector<size_t>& points) {
    std::string out;
    for (size_t p : points)
      out += fmt::format("{}<a href=\"#point-{}\">{}</a>", out.empty() ? "" : ", ", p, p);
    return out;
  };
  body += "<div id=\"plot-memory\">\n";
  if (memory.empty())
    body += "<p class=\"h-note\">No point was simulated: nothing to plot.</p>\n";
  else
    body += pareto_svg(memory, "memory peak per GPU (GiB)", capacity / gib, "capacity " + html::gib(capacity)) +
            "<p class=\"h-note\">Pareto front (no other point has more tokens/s for less memory): points " +
            front_list(memory_front) + ".</p>\n";
  body += "</div>\n<div id=\"plot-energy\" hidden>\n";
  if (energy.empty())
    body += "<p class=\"h-note\">No simulated point has an energy figure: nothing to plot.</p>\n";
  else
    body += pareto_svg(energy, "energy per token (J)", 0, "") +
            "<p class=\"h-note\">Pareto front (no other point has more tokens/s for less energy): points " +
            front_list(energy_front) + ".</p>\n";
  body += "</div>\n<div class=\"h-legend\"><span><i style=\"background:#D55E00\"></i>on the Pareto front</span>"
          "<span><i style=\"background:#0072B2;opacity:.55\"></i>other simulated points</span>"
          "<span>hover a point for its figures, click it for its row</span></div>\n</section>\n";

  // What the plot leaves out.
  body += "<section id=\"excluded\">\n<h2>Not plotted</h2>\n";
  if (excluded.empty())
    body += "<p class=\"h-note\">Every point was simulated.</p>\n";
  else {
    body += "<div class=\"h-scroll h-tall h-short\"><table class=\"h-t\">\n<thead><tr><th>point</th><th class=\"h-l\">status</th>"
            "<th class=\"h-l\">reason</th><th class=\"h-l\">parameters</th></tr></thead>\n<tbody>\n";
    for (const auto* r : excluded)
      put(body, "<tr><td><a href=\"#point-{0}\">{0}</a></td><td class=\"h-l\">{1}</td><td class=\"h-l h-wrap\">{2}</td>"
          "<td class=\"h-l h-wrap\">{3}</td></tr>\n",
          r->value("point", size_t{0}), escape(r->value("status", std::string())),
          escape(r->value("reason", std::string())), escape(parameters_text(*r)));
    body += "</tbody></table></div>\n";
  }
  body += "</section>\n";

  // Every point: the CSV as a table. A column is sorted as numbers when each of its cells is one.
  static const std::regex per_stage("^stage[0-9]+_.*");
  std::vector<bool> numeric(header.size(), true), stage_column(header.size(), false);
  bool any_stage_column = false;
  for (size_t c = 0; c < header.size(); ++c) {
    stage_column[c] = std::regex_match(header[c], per_stage);
    any_stage_column = any_stage_column || stage_column[c];
    bool any = false;
    for (size_t i = 1; i < csv.size(); ++i)
      if (c < csv[i].size() && !csv[i][c].empty()) {
        any        = true;
        numeric[c] = numeric[c] && is_number(csv[i][c]);
      }
    numeric[c] = numeric[c] && any;
  }
  put(body, "<section id=\"points\">\n<h2>All points</h2>\n<p class=\"h-note\">The rows and columns of the CSV ({} "
      "columns: scroll sideways). Click a header to sort by it, again to reverse.",
      header.size());
  if (any_stage_column)
    body += " <label><input type=\"checkbox\" id=\"show-stages\"> show the per-stage columns "
            "(<code>stage&lt;N&gt;_*</code>)</label>";
  body += "</p>\n<div class=\"h-scroll h-tall\"><table class=\"h-t h-hide-st\" id=\"points-table\">\n<colgroup>";
  // Per-stage columns hidden by default through their <col>, which costs nothing per cell.
  for (size_t c = 0; c < header.size(); ++c)
    body += stage_column[c] ? "<col class=\"h-st\">" : "<col>";
  body += "</colgroup>\n<thead><tr>";
  for (size_t c = 0; c < header.size(); ++c)
    put(body, "<th{}{}>{}</th>", numeric[c] ? " data-num=\"1\"" : "", numeric[c] ? "" : " class=\"h-l\"",
        escape(header[c]));
  body += "</tr></thead>\n<tbody>\n";
  const std::set<size_t> on_front(memory_front.begin(), memory_front.end()); // a shard's points are sparse
  for (size_t i = 1; i < csv.size(); ++i) {
    const std::string& point = csv[i].empty() ? std::string() : csv[i][0];
    const nlohmann::json* r  = i - 1 < results.size() ? &results[i - 1] : nullptr;
    const std::string status = r != nullptr ? r->value("status", std::string()) : "";
    const size_t index       = r != nullptr ? r->value("point", size_t{0}) : 0;
    put(body, "<tr id=\"point-{0}\" data-point=\"{0}\" class=\"h-{1}{2}\">", escape(point), escape(status),
        on_front.count(index) > 0 && status == "ok" ? " h-front" : "");
    for (size_t c = 0; c < header.size(); ++c)
      put(body, "<td{}>{}</td>", numeric[c] ? "" : " class=\"h-l\"", escape(c < csv[i].size() ? csv[i][c] : ""));
    body += "</tr>\n";
  }
  body += "</tbody></table></div>\n<p class=\"h-note\">Rows on the memory Pareto front are bold; infeasible and "
          "failed points are tinted.</p>\n</section>\n";

  // The plotted figures as data, for scripts; the page checks it against its rows.
  nlohmann::json data = {{"name", name}, {"points", nlohmann::json::array()}};
  for (const auto& r : results) {
    nlohmann::json p = {{"point", r.value("point", size_t{0})}, {"status", r.value("status", std::string())},
                        {"parameters", r.value("parameters", nlohmann::json::object())}};
    if (r.contains("report") && r["report"].is_object())
      for (const char* key : {"tokens_per_s", "memory_peak_bytes", "energy_j_per_token", "step_time_s"})
        p[key] = r["report"].value(key, 0.0);
    data["points"].push_back(std::move(p));
  }
  body += html::json_script("stepsim-sweep", data);

  const std::string script = R"js(const data = JSON.parse(document.getElementById('stepsim-sweep').textContent);
const table = document.getElementById('points-table');
const rows = table.tBodies[0];
if (data.points.length !== rows.rows.length) throw new Error('sweep data and table disagree');
const heads = Array.from(table.tHead.rows[0].cells);
heads.forEach((th, col) => th.addEventListener('click', () => {
  const numeric = th.dataset.num === '1';
  const dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
  heads.forEach(h => h.removeAttribute('aria-sort'));
  th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
  const value = tr => tr.cells[col].textContent;
  const sorted = Array.from(rows.rows).sort((a, b) => {
    const x = value(a), y = value(b);
    if (x === '' || y === '') return x === y ? 0 : (x === '' ? 1 : -1); // empty cells last
    const c = numeric ? Number(x) - Number(y) : (x < y ? -1 : x > y ? 1 : 0);
    return c * dir || Number(a.dataset.point) - Number(b.dataset.point);
  });
  rows.append(...sorted);
}));
const stages = document.getElementById('show-stages');
if (stages) stages.addEventListener('change', () => table.classList.toggle('h-hide-st', !stages.checked));
document.querySelectorAll('button[data-plot]').forEach(b => b.addEventListener('click', () => {
  document.querySelectorAll('button[data-plot]').forEach(o => {
    o.setAttribute('aria-pressed', String(o === b));
    document.getElementById('plot-' + o.dataset.plot).hidden = o !== b;
  });
}));
)js";
  const std::string css =
      ".h-tall{max-height:70vh;overflow:auto;border:1px solid var(--line)}\n.h-short{max-height:290px}\n"
      "table.h-hide-st col.h-st{visibility:collapse}\n"
      "#points-table th{cursor:pointer;user-select:none}\n"
      "#points-table th[aria-sort=ascending]::after{content:' \\25B2'}\n"
      "#points-table th[aria-sort=descending]::after{content:' \\25BC'}\n"
      "#points-table td:first-child,#points-table th:first-child{position:sticky;left:0;background:#f0f2f5;z-index:1}\n"
      "#points-table th:first-child{z-index:2}\n"
      "tr.h-infeasible,tr.h-error{background:#fff4f2}\ntr.h-front td{font-weight:700}\n"
      "#excluded td.h-wrap{white-space:normal;text-align:left;min-width:300px}\n"
      ".h-toggle{margin:0 0 8px}\n.h-toggle button{font:inherit;padding:4px 12px;border:1px solid #b8bec8;"
      "background:#fff;cursor:pointer}\n.h-toggle button:first-child{border-radius:4px 0 0 4px}\n"
      ".h-toggle button:last-child{border-radius:0 4px 4px 0;border-left:0}\n"
      ".h-toggle button[aria-pressed=true]{background:var(--accent);color:#fff;border-color:var(--accent)}\n";
  return html::page("Sweep " + name + " — stepsim", body, css, script);
}

} // namespace stepsim
