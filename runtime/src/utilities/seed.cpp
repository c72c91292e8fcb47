// seed_everything, and one default generator seed for the ranks of an
// unseeded program (agree_on_default_generator, seed.h).
#include "utilities/seed.h"

#include "utilities/messages.h"

#include <fabric/types.h>

#include <ATen/CPUGeneratorImpl.h>

#include <cstdlib>
#include <mutex>
#include <string>

namespace fabric {

namespace detail {
namespace {

// LibTorch's default CPU generator as this library found it when it was
// loaded, before main: Debian's LibTorch seeds it from /dev/urandom in every
// process, so its seed differs between ranks until a program seeds it.
struct DefaultGeneratorAtLoad {
  uint64_t seed = 0;
  torch::Tensor state;
  DefaultGeneratorAtLoad() {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    seed = generator.current_seed();
    state = generator.get_state();
  }
};
const DefaultGeneratorAtLoad default_generator_at_load;

}  // namespace

void agree_on_default_generator(c10d::Store& store, int rank, std::chrono::milliseconds timeout) {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  uint64_t seed = 0;
  bool drawn = false;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    seed = generator.current_seed();
    drawn = !torch::equal(generator.get_state(), default_generator_at_load.state);
  }
  // A seed set by the program (the same on every rank, or per rank on
  // purpose) is the program's: it stays.
  const bool seeded_by_program = seed != default_generator_at_load.seed;
  const std::string key = "fabric/default_generator_seed";
  if (rank == 0) {
    const std::string text = std::to_string(seed);
    store.set(key, std::vector<uint8_t>(text.begin(), text.end()));
  } else {
    store.wait({key}, timeout);
  }
  if (seeded_by_program) return;
  const std::vector<uint8_t> value = store.get(key);
  const uint64_t seed_of_rank_0 = std::stoull(std::string(value.begin(), value.end()));
  torch::manual_seed(seed_of_rank_0);  // also every CUDA device's generator
  // Every rank runs the same code: rank 0 speaks for all, once.
  if (drawn && rank == 0) {
    write_stderr_line(
        "fabric: the program drew random numbers from LibTorch's default generator before "
        "launch() without seeding it; those numbers differ between the ranks (this LibTorch "
        "seeds every process differently). From launch() on, every rank draws from rank 0's "
        "seed. Seed first (fabric::seed_everything(seed) or torch::manual_seed(seed) at the top "
        "of main) to draw the same numbers before launch() too.");
  }
}

}  // namespace detail

uint64_t seed_everything(uint64_t seed) {
  torch::manual_seed(seed);  // also every CUDA device's generator
  std::srand(static_cast<unsigned>(seed));
  ::setenv("PL_GLOBAL_SEED", std::to_string(seed).c_str(), 1);
  return seed;
}

}  // namespace fabric
