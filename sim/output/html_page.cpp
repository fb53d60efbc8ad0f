#include "sim/output/html_page.hpp"

#include <fmt/format.h>

#include <cmath>

namespace stepsim::html {

namespace {

// System fonts only: a web font would be a fetch.
constexpr const char* kStyle = R"css(
:root{--ink:#1d2330;--soft:#5b6472;--line:#dde1e7;--bg:#f4f5f7;--accent:#0072B2;--bad:#c62828}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);font:14px/1.45 system-ui,-apple-system,"Segoe UI","DejaVu Sans",Arial,sans-serif}
main{max-width:1280px;margin:0 auto;padding:20px 24px 40px}
h1{font-size:24px;margin:4px 0 2px}
h2{font-size:17px;margin:0 0 10px}
.h-sub{color:var(--soft);margin:0 0 16px}
section{background:#fff;border:1px solid var(--line);border-radius:8px;padding:16px 18px;margin:0 0 18px}
.h-note{color:var(--soft);font-size:13px;margin:8px 0 0}
.h-warn{color:var(--bad);font-weight:600}
.h-cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:10px;margin-bottom:14px}
.h-card{border:1px solid var(--line);border-radius:6px;padding:8px 12px;background:#fafbfc}
.h-card b{display:block;font-size:20px;font-variant-numeric:tabular-nums;white-space:nowrap}
.h-card span{color:var(--soft);font-size:12px}
.h-card.h-bad b{color:var(--bad)}
.h-scroll{overflow-x:auto}
table.h-t{border-collapse:collapse;font-variant-numeric:tabular-nums}
table.h-t th,table.h-t td{padding:4px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
table.h-t th{background:#f0f2f5;font-weight:600;position:sticky;top:0}
table.h-t .h-l{text-align:left}
table.h-t tbody tr:hover{background:#eef5fb}
table.h-kv td{padding:3px 14px 3px 0;vertical-align:top}
table.h-kv td:first-child{color:var(--soft);white-space:nowrap}
.h-bar{display:inline-block;height:10px;background:var(--accent);border-radius:2px;vertical-align:middle}
svg.h-chart{display:block;max-width:100%;height:auto}
svg.h-chart text{font-family:system-ui,-apple-system,"Segoe UI","DejaVu Sans",Arial,sans-serif}
.h-legend{display:flex;flex-wrap:wrap;gap:14px;margin:6px 0 0;font-size:13px}
.h-legend i{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;vertical-align:-1px}
)css";

constexpr const char* kPrologue = "'use strict';\n";
// Runs last: reached only when the page's own script threw nothing.
constexpr const char* kEpilogue = "document.body.setAttribute('data-rendered', 'ok');\n";

} // namespace

std::string escape(const std::string& text)
{
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
    case '&': out += "&amp;"; break;
    case '<': out += "&lt;"; break;
    case '>': out += "&gt;"; break;
    case '"': out += "&quot;"; break;
    case '\'': out += "&#39;"; break;
    default: out += c;
    }
  }
  return out;
}

std::string json_script(const std::string& id, const nlohmann::json& data)
{
  // Invalid UTF-8 (a name read from a file) becomes U+FFFD rather than an exception.
  const std::string text = data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::string safe;
  safe.reserve(text.size());
  for (char c : text) {
    // These characters only occur inside JSON strings, where the \u form means the same.
    switch (c) {
    case '<': safe += "\\u003c"; break;
    case '>': safe += "\\u003e"; break;
    case '&': safe += "\\u0026"; break;
    default: safe += c;
    }
  }
  return fmt::format("<script type=\"application/json\" id=\"{}\">{}</script>\n", escape(id), safe);
}

std::string page(const std::string& title, const std::string& body, const std::string& css, const std::string& script)
{
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<title>" + escape(title) + "</title>\n<style>" + kStyle + css + "</style>\n</head>\n<body>\n<main>\n";
  out += body;
  out += "</main>\n<script>\n";
  out += kPrologue;
  out += script;
  out += kEpilogue;
  out += "</script>\n</body>\n</html>\n";
  return out;
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024)); }

std::string fixed(double v, int decimals) { return fmt::format("{:.{}f}", v, decimals); }

std::string percent(double fraction) { return fmt::format("{:.1f}%", 100 * fraction); }

std::string grouped(double v)
{
  if (!std::isfinite(v))
    return fmt::format("{}", v);
  std::string digits = fmt::format("{:.0f}", std::fabs(v));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return (v < 0 && digits != "0" ? "-" : "") + out;
}

double tick_step(double span, int count)
{
  if (!(span > 0))
    return 1;
  const double raw       = span / count;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * magnitude >= raw)
      return m * magnitude;
  return 10 * magnitude;
}

std::string px(double v) { return fmt::format("{:.1f}", v); }

} // namespace stepsim::html
