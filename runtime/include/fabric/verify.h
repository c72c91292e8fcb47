// Records of a training run, for `fabricize verify`.
//
// verify runs the original program (instrumented by fabricize: a call to
// fabric::verify::begin() first in main, record_loss before each backward(),
// a StepRecord around each optimizer step) and the migrated one (the runtime
// records the same from fabric.backward() and fabric.step()), then compares
// the records. Recording is on only when FABRIC_VERIFY_RECORD names a folder;
// off, each hook is one test of a flag read once.
//
// Each process writes <folder>/rank<R>.txt:
//   process <pid> rank <R> world <W>
//   loss <n> <value as %a> <value as %.9g>     one per backward
//   step <n> <hash> <offset>                   one per optimizer step: FNV-1a
//                                              of every byte of the
//                                              optimizer's parameters, and
//                                              the stdout offset at that time
//   share <site> <total> <mine>                this rank's share of a data
//                                              loop: <total> values of the
//                                              whole loop, <mine> of them
//                                              this rank's own (without the
//                                              padded one); <site> is the
//                                              caller's <file>:<line>
//                                              (fabric.shard_range,
//                                              shard_elements, fabric.shard,
//                                              fabric::shard) or loader<N>,
//                                              the N-th fabric.setup_dataloader
//                                              of the process (its sampler,
//                                              each epoch); once per site and
//                                              distinct (total, mine)
//   end <reason>                               budget | exit
// FABRIC_VERIFY_STEPS=N ends the process (exit code 0, output flushed) after
// its N-th optimizer step; FABRIC_VERIFY_SEED (default 1234) is the seed
// begin() gives torch::manual_seed, so both programs start from the same
// weights whatever the program seeds later.
#pragma once

#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>
#include <torch/utils.h>

#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <type_traits>

namespace fabric {
namespace verify {
namespace detail {

class Recorder {
 public:
  static Recorder& instance() {
    static Recorder recorder;
    return recorder;
  }
  bool enabled() const { return !folder_.empty(); }

  // The process's rank (the runtime sets it; an original program is rank 0).
  void open(int rank, int world_size) {
    if (!enabled() || file_ != nullptr) return;
    const std::string path = folder_ + "/rank" + std::to_string(rank) + ".txt";
    file_ = std::fopen(path.c_str(), "w");
    if (file_ == nullptr) {
      std::fprintf(stderr, "fabric::verify: cannot write %s\n", path.c_str());
      std::_Exit(2);
    }
    std::fprintf(file_, "process %ld rank %d world %d\n", static_cast<long>(::getpid()), rank, world_size);
    std::fflush(file_);
    std::atexit([] { Recorder::instance().finish("exit"); });
  }

  // The strategy the runtime resolved (fabricize verify reports it).
  void strategy(const std::string& name) {
    if (!enabled()) return;
    open(0, 1);
    std::fprintf(file_, "strategy %s\n", name.c_str());
  }

  void loss(const at::Tensor& value) {
    if (!enabled()) return;
    open(0, 1);
    const double number = value.detach().to(at::kDouble).cpu().sum().item<double>();
    std::fprintf(file_, "loss %" PRId64 " %a %.9g\n", ++losses_, number, number);
  }

  void step(const torch::optim::Optimizer& optimizer) {
    if (!enabled()) return;
    open(0, 1);
    std::uint64_t hash = 1469598103934665603ull;
    for (const auto& group : optimizer.param_groups()) {
      for (const auto& parameter : group.params()) {
        const at::Tensor bytes = parameter.detach().cpu().contiguous();
        const auto* data = static_cast<const unsigned char*>(bytes.data_ptr());
        const size_t size = static_cast<size_t>(bytes.numel()) * bytes.element_size();
        for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 1099511628211ull;
      }
    }
    // Where the console output stands (a file under verify): the lines
    // printed before this step's record were printed after this many steps.
    std::cout.flush();
    std::fflush(stdout);
    const long long at = static_cast<long long>(::lseek(1, 0, SEEK_CUR));
    std::fprintf(file_, "step %" PRId64 " %016" PRIx64 " %lld\n", ++steps_, hash, at);
    std::fflush(file_);
    if (budget_ > 0 && steps_ >= budget_) {
      finish("budget");
      std::cout.flush();
      std::cerr.flush();
      std::fflush(nullptr);
      std::_Exit(0);
    }
  }

  // A data loop's share on this rank (the runtime's sharding primitives).
  void share(const std::string& site, std::uint64_t total, std::uint64_t mine) {
    if (!enabled()) return;
    open(0, 1);
    const std::string line = site + " " + std::to_string(total) + " " + std::to_string(mine);
    if (!shares_.insert(line).second) return;
    std::fprintf(file_, "share %s\n", line.c_str());
    std::fflush(file_);
  }

  void finish(const char* reason) {
    if (file_ == nullptr) return;
    std::fprintf(file_, "end %s\n", reason);
    std::fclose(file_);
    file_ = nullptr;
    folder_.clear();
  }

  std::uint64_t seed() const { return seed_; }

 private:
  Recorder() {
    if (const char* folder = std::getenv("FABRIC_VERIFY_RECORD")) folder_ = folder;
    if (const char* steps = std::getenv("FABRIC_VERIFY_STEPS")) budget_ = std::atoll(steps);
    if (const char* seed = std::getenv("FABRIC_VERIFY_SEED")) seed_ = std::strtoull(seed, nullptr, 10);
  }
  std::string folder_;
  std::FILE* file_ = nullptr;
  std::int64_t losses_ = 0, steps_ = 0, budget_ = 0;
  std::uint64_t seed_ = 1234;
  std::set<std::string> shares_;  // the share lines written
};

template <typename T>
const torch::optim::Optimizer& optimizer_of(const T& optimizer) {
  if constexpr (std::is_base_of<torch::optim::Optimizer, T>::value) {
    return optimizer;
  } else {
    return optimizer_of(*optimizer);  // a raw or smart pointer
  }
}

}  // namespace detail

inline bool recording() { return detail::Recorder::instance().enabled(); }

// First in main: the fixed seed (both programs draw the same numbers).
inline void begin(int rank = 0, int world_size = 1) {
  auto& recorder = detail::Recorder::instance();
  if (!recorder.enabled()) return;
  torch::manual_seed(recorder.seed());
  recorder.open(rank, world_size);
}

inline void record_strategy(const std::string& name) { detail::Recorder::instance().strategy(name); }

inline void record_loss(const at::Tensor& loss) { detail::Recorder::instance().loss(loss); }

template <typename Optimizer>
void record_step(const Optimizer& optimizer) {
  detail::Recorder::instance().step(detail::optimizer_of(optimizer));
}

// `(fabric::verify::StepRecord(opt), opt.step())`: the temporary lives to
// the end of the full expression, so the record is made after the step,
// whatever the step's form (a closure, a returned loss, `->`).
class StepRecord {
 public:
  template <typename Optimizer>
  explicit StepRecord(const Optimizer& optimizer) : optimizer_(&detail::optimizer_of(optimizer)) {}
  ~StepRecord() { detail::Recorder::instance().step(*optimizer_); }
  StepRecord(const StepRecord&) = delete;
  StepRecord& operator=(const StepRecord&) = delete;

 private:
  const torch::optim::Optimizer* optimizer_;
};

}  // namespace verify
}  // namespace fabric
