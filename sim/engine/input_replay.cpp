#include "sim/engine/input_replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <stdexcept>

namespace stepsim {

namespace sg4 = simgrid::s4u;

struct InputReplay::Loader {
  sg4::MutexPtr mutex             = sg4::Mutex::create();
  sg4::ConditionVariablePtr event = sg4::ConditionVariable::create();
  long long taken                 = 0; // batches the training loop has taken
  std::vector<bool> decoded, ready;
};

InputReplay::InputReplay(sg4::NetZone* root, const InputReplayPlan& plan) : plan_(plan)
{
  if (plan.loaders.empty() || plan.micro_batches < 1 || plan.measured_steps < 1 || plan.steps <= plan.measured_steps ||
      plan.need_s.size() != static_cast<size_t>(plan.micro_batches))
    throw std::logic_error("an input replay needs loaders, micro-batches, their need times and two steps");
  const HostSidePlatform paced = build_host_side(root, plan.platform, "paced-");
  const HostSidePlatform free  = build_host_side(root, plan.platform, "free-");
  paced_step_ends_.assign(static_cast<size_t>(plan.steps), 0);
  free_step_ready_.assign(static_cast<size_t>(plan.steps), 0);
  start(paced, true);
  start(free, false);
}

void InputReplay::start(const HostSidePlatform& platform, bool paced)
{
  const InputReplayPlan& p = plan_;
  const long long total    = 1LL * p.steps * p.micro_batches;
  const long long window   = 1LL * p.workers * p.prefetch_factor;
  auto barrier             = sg4::Barrier::create(static_cast<unsigned>(p.loaders.size()));
  for (size_t l = 0; l < p.loaders.size(); ++l) {
    auto loader = std::make_shared<Loader>();
    loader->decoded.assign(static_cast<size_t>(total), false);
    loader->ready.assign(static_cast<size_t>(total), false);
    loaders_.push_back(loader);
    const auto node  = static_cast<size_t>(p.loaders[l].node);
    sg4::Host* cpu   = platform.cpu[node];
    sg4::Host* gpu   = platform.gpus[node].at(static_cast<size_t>(p.loaders[l].gpu));
    sg4::Host* from  = p.from_storage ? platform.storage : platform.disk[node];
    const std::string name = fmt::format("{}loader{}", paced ? "paced-" : "free-", l);
    for (int w = 0; w < p.workers; ++w)
      sg4::Actor::create(fmt::format("{}-worker{}", name, w), cpu, [loader, from, cpu, &p, total, window, w] {
        for (long long i = w; i < total; i += p.workers) {
          {
            std::unique_lock<sg4::Mutex> lock(*loader->mutex);
            while (i >= loader->taken + window)
              loader->event->wait(lock);
          }
          transfer(from, cpu, p.read_bytes);
          sg4::this_actor::execute(p.decode_cpu_s);
          std::unique_lock<sg4::Mutex> lock(*loader->mutex);
          loader->decoded[static_cast<size_t>(i)] = true;
          loader->event->notify_all();
        }
      });
    // pin_memory's thread and the copy to the GPU, batch after batch in order.
    sg4::Actor::create(name + "-copy", cpu, [loader, cpu, gpu, &p, total] {
      for (long long i = 0; i < total; ++i) {
        {
          std::unique_lock<sg4::Mutex> lock(*loader->mutex);
          while (!loader->decoded[static_cast<size_t>(i)])
            loader->event->wait(lock);
        }
        transfer(cpu, gpu, p.device_bytes);
        std::unique_lock<sg4::Mutex> lock(*loader->mutex);
        loader->ready[static_cast<size_t>(i)] = true;
        loader->event->notify_all();
      }
    });
    const bool first = l == 0;
    sg4::Actor::create(name + "-training", gpu, [this, loader, barrier, &p, paced, first] {
      auto take = [&](long long i) {
        std::unique_lock<sg4::Mutex> lock(*loader->mutex);
        while (!loader->ready[static_cast<size_t>(i)])
          loader->event->wait(lock);
        loader->taken = i + 1;
        loader->event->notify_all();
      };
      double start = sg4::Engine::get_clock();
      for (int k = 0; k < p.steps; ++k) {
        double late = 0; // how far the step has slipped behind its replayed timeline
        for (int j = 0; j < p.micro_batches; ++j) {
          const double due = start + p.need_s[static_cast<size_t>(j)] + late;
          if (paced)
            sg4::this_actor::sleep_until(due);
          take(1LL * k * p.micro_batches + j);
          late = std::max(late, sg4::Engine::get_clock() - (start + p.need_s[static_cast<size_t>(j)]));
        }
        if (paced)
          sg4::this_actor::sleep_until(start + p.step_s + late);
        barrier->wait();
        start = sg4::Engine::get_clock();
        if (first)
          (paced ? paced_step_ends_ : free_step_ready_)[static_cast<size_t>(k)] = start;
      }
    });
  }
}

InputReplayResult InputReplay::result() const
{
  // Averaged over the last measured_steps: workers that start together finish their batches
  // together, so steps come in bursts, and the measured steps span whole rounds of them.
  const size_t n    = paced_step_ends_.size();
  const size_t from = n - 1 - static_cast<size_t>(plan_.measured_steps);
  const double span = plan_.measured_steps;
  InputReplayResult r;
  r.step_s       = (paced_step_ends_[n - 1] - paced_step_ends_[from]) / span;
  r.input_path_s = (free_step_ready_[n - 1] - free_step_ready_[from]) / span;
  return r;
}

} // namespace stepsim
