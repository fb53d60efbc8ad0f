#include "tools/driver/process_pool.hpp"

#include "sim/simulate.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <map>
#include <poll.h>
#include <stdexcept>
#include <sys/wait.h>
#include <unistd.h>

namespace stepsim {

namespace {

struct Worker {
  size_t item = 0;
  pid_t pid   = 0;
  std::string output;
};

} // namespace

bool write_all(int fd, const std::string& text)
{
  size_t written = 0;
  while (written < text.size()) {
    ssize_t n = write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    written += static_cast<size_t>(n);
  }
  return true;
}

void run_in_processes(const std::vector<size_t>& items, int jobs, const std::function<std::string(size_t)>& work,
                      const std::function<void(size_t, std::string)>& done)
{
  if (jobs < 1)
    jobs = 1;
  std::map<int, Worker> running; // by the read end of its pipe
  size_t next = 0;
  while (next < items.size() || !running.empty()) {
    while (next < items.size() && static_cast<int>(running.size()) < jobs) {
      int fds[2];
      if (pipe(fds) != 0)
        throw std::runtime_error("cannot create a pipe for a worker process");
      std::fflush(nullptr); // else the child would write the parent's buffered output again
      const pid_t parent = getpid();
      pid_t pid          = fork();
      if (pid < 0)
        throw std::runtime_error("cannot fork a worker process");
      if (pid == 0) {
        die_with_parent(parent);
        close(fds[0]);
        for (const auto& [fd, w] : running)
          close(fd);
        std::string text;
        try {
          text = work(items[next]);
        } catch (...) {
          text.clear();
        }
        (void)write_all(fds[1], text); // what does not arrive, the parent records as a failed point
        close(fds[1]);
        _exit(0);
      }
      close(fds[1]);
      running.emplace(fds[0], Worker{items[next], pid, {}});
      ++next;
    }
    std::vector<pollfd> watch;
    for (const auto& [fd, w] : running)
      watch.push_back(pollfd{fd, POLLIN, 0});
    if (poll(watch.data(), watch.size(), -1) < 0) {
      if (errno == EINTR)
        continue;
      throw std::runtime_error("cannot wait for the worker processes");
    }
    for (const auto& p : watch) {
      if (p.revents == 0)
        continue;
      Worker& w = running.at(p.fd);
      char buffer[65536];
      ssize_t n = read(p.fd, buffer, sizeof buffer);
      if (n > 0) {
        w.output.append(buffer, static_cast<size_t>(n));
        continue;
      }
      if (n < 0 && errno == EINTR)
        continue;
      close(p.fd); // end of the child's output
      int status = 0;
      waitpid(w.pid, &status, 0);
      Worker finished = std::move(w);
      running.erase(p.fd);
      done(finished.item, std::move(finished.output));
    }
  }
}

} // namespace stepsim
