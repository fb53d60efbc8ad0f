// libFuzzer target: the text of a sweep journal or shard (`stepsim sweep` resumes from one,
// `stepsim merge` joins them) → result lines → the CSV and JSONL written from them. Bad input must
// end as an InputError naming FILE:LINE; another exception, a crash or a sanitizer report is a
// finding.
#include "sim/core/input_error.hpp"
#include "tools/driver/sweep.hpp"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
  using namespace stepsim;
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto lines = result_lines(text, "fuzz.jsonl", "");
    std::vector<std::string> axes;
    if (!lines.empty() && lines.front().contains("parameters"))
      for (const auto& [path, value] : lines.front()["parameters"].items())
        axes.push_back(path);
    (void)sweep_csv(axes, lines);
    (void)sweep_jsonl(lines);
  } catch (const InputError&) {
    // The expected end of bad input.
  }
  return 0;
}
