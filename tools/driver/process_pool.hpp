// Runs independent jobs in forked worker processes, at most `jobs` at a time. SimGrid allows one
// engine per process, so every simulation of a sweep runs in a child of its own; the parent
// stays single-threaded (no fork from a threaded process) and collects each child's output
// through a pipe as it finishes.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace stepsim {

// Runs work(i) for each i in `items`, each in a forked child whose returned text comes back to
// done(i, text) in the parent, in completion order. A child that dies without writing anything
// gives done(i, "") so the caller can record the failure.
void run_in_processes(const std::vector<size_t>& items, int jobs, const std::function<std::string(size_t)>& work,
                      const std::function<void(size_t, std::string)>& done);

// Writes all of `text` to `fd`, retrying short writes and EINTR; false when the descriptor takes
// no more (a full disk, a closed pipe). One call per line keeps a journal line whole.
bool write_all(int fd, const std::string& text);

} // namespace stepsim
