// What stepsim's HTML pages (`run --html`, `sweep --html`) share: escaping, data embedded as
// JSON, SVG chart pieces and the page frame with its stylesheet.
//
// A page is one self-contained file: its CSS, JavaScript and charts are inline and it names no
// other file or address, so it opens offline and can be mailed as it is. It is deterministic:
// the same report gives the same bytes (no dates, no random ids).
//
// The Gantt chart inlined in a run page brings its own <style>, which applies to the whole page;
// the page's classes are therefore prefixed "h-" so that neither styles the other's elements.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace stepsim::html {

// Text for HTML content or an attribute value: & < > " ' escaped.
std::string escape(const std::string& text);

// `data` as <script type="application/json" id="ID">: '<', '>' and '&' are written as \u003c,
// \u003e, \u0026, so that no string in it can close the element ("</script>") or open a comment.
std::string json_script(const std::string& id, const nlohmann::json& data);

// The whole page: doctype, head with the shared stylesheet plus `css`, then `body`, then `script`
// (inline JavaScript run once the body is parsed). The shared script prologue marks the body
// data-rendered="ok" after `script` ran without an exception (tools/pictures/check_html.sh reads it).
std::string page(const std::string& title, const std::string& body, const std::string& css, const std::string& script);

// Figures as pages write them.
std::string gib(double bytes);                 // "74.21 GiB"
std::string fixed(double v, int decimals);     // "0.1234"
std::string percent(double fraction);          // "41.2%"
std::string grouped(double v);                 // "1,234,567" (rounded)

// A tick step of 1, 2 or 5 × 10^k giving about `count` ticks over [0, span].
double tick_step(double span, int count);
// A coordinate of an SVG chart: a tenth of a pixel is finer than any screen shows.
std::string px(double v);

} // namespace stepsim::html
