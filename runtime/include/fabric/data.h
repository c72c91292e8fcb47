// fabric::DataLoader: what Fabric::setup_dataloader returns. It behaves like
// the torch::data loader it replaces (range-for, begin/end, join, options),
// and in addition
//  - starts every pass with set_epoch(n) on a distributed sampler, so each
//    epoch is shuffled differently (as Lightning's Fabric loader does);
//  - hands out batches already moved to the Fabric's device (to_device);
//  - with several processes, gives each rank its share of the data: a
//    training loader pads the shares to equal length, a loader that feeds
//    no backward pass (evaluation) counts every sample once (ShardSampler).
#pragma once

#include <fabric/to_device.h>
#include <fabric/verify.h>

#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <numeric>
#include <random>
#include <memory>
#include <stdexcept>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fabric {
namespace detail {

// What fabric::State saves and loads of an object that is neither a module
// nor an optimizer (a DataLoader: its epoch and its position in it).
class StatefulEntry {
 public:
  virtual ~StatefulEntry() = default;
  virtual void save_state(torch::serialize::OutputArchive& archive) const = 0;
  virtual void load_state(torch::serialize::InputArchive& archive) = 0;
  // What the checkpoint records as this entry's kind.
  virtual const char* kind() const { return "loader"; }
  // Each rank's own state (a generator of the program's that ranks seed
  // differently): save gathers every rank's text, load gives each rank its
  // own back. save_state/load_state are then not used.
  virtual bool per_rank() const { return false; }
  virtual std::string per_rank_text() const { return {}; }
  virtual void load_per_rank_text(const std::string& text) { (void)text; }
};

// A standard random engine of the program's (std::mt19937...): its state
// as the engine writes it (operator<<), every rank's.
template <class Engine>
class EngineState final : public StatefulEntry {
 public:
  explicit EngineState(Engine& engine) : engine_(engine) {}
  void save_state(torch::serialize::OutputArchive&) const override {}
  void load_state(torch::serialize::InputArchive&) override {}
  const char* kind() const override { return "std_generator"; }
  bool per_rank() const override { return true; }
  std::string per_rank_text() const override {
    std::ostringstream text;
    text << engine_;
    return text.str();
  }
  void load_per_rank_text(const std::string& text) override {
    std::istringstream in(text);
    in >> engine_;
    if (in.fail()) throw std::runtime_error("the saved state of a standard random engine does not parse");
  }

 private:
  Engine& engine_;
};

// torch::data::make_data_loader stores its sampler by value, so set_epoch on
// any sampler kept outside would change a copy nobody uses. The loader gets
// this forwarder instead, and both sides share the one real sampler.
template <class BatchRequest>
class SharedSampler final : public torch::data::samplers::Sampler<BatchRequest> {
 public:
  // `restore`, when it holds a function, replaces the next reset: a loader
  // resumed from a checkpoint puts its sampler back where it was instead of
  // starting a new pass (before the loader's workers prefetch from it).
  SharedSampler(std::shared_ptr<torch::data::samplers::Sampler<BatchRequest>> sampler,
                std::shared_ptr<std::function<void()>> restore)
      : sampler_(std::move(sampler)), restore_(std::move(restore)) {}

  void reset(c10::optional<size_t> new_size = c10::nullopt) override {
    if (restore_ && *restore_) {
      auto restore = std::move(*restore_);
      *restore_ = nullptr;
      restore();
      return;
    }
    sampler_->reset(new_size);
  }
  c10::optional<BatchRequest> next(size_t batch_size) override { return sampler_->next(batch_size); }
  void save(torch::serialize::OutputArchive& archive) const override { sampler_->save(archive); }
  void load(torch::serialize::InputArchive& archive) override { sampler_->load(archive); }

 private:
  std::shared_ptr<torch::data::samplers::Sampler<BatchRequest>> sampler_;
  std::shared_ptr<std::function<void()>> restore_;
};

// How many backward passes this process has run (Fabric::backward counts
// them). A loader's sampler reads it to tell a training loader from one that
// only evaluates.
using BackwardPassCounter = std::shared_ptr<const std::atomic<uint64_t>>;

// This rank's share of the data set when the job has several processes, the
// way PyTorch's DistributedSampler splits it: every rank builds the same
// order of 0..size-1 (shuffled from the epoch number, or in order), padded
// to a multiple of num_replicas with indices from its start, and takes the
// positions rank, rank + num_replicas, ... of it. A rank's share then holds
// its samples first and at most one padded (repeated) sample last.
//
// Whether that padded sample is handed out is decided when the pass reaches
// it: a loader whose batches have fed a backward pass (a training loader)
// hands it out, so every rank runs the same number of steps (a rank with a
// batch fewer would leave the others waiting in the gradient all-reduce); a
// loader that has fed none (evaluation) leaves it out, so every sample is
// counted exactly once over all ranks: its last batch may be one shorter on
// some ranks, and a rank may get one batch fewer.
//
// `site` names the loader in fabricize verify's records (FABRIC_VERIFY_RECORD:
// `share <site> <size> <this rank's samples>` once per epoch size).
class ShardSampler final : public torch::data::samplers::DistributedSampler<> {
 public:
  ShardSampler(size_t size, size_t num_replicas, size_t rank, bool shuffle, BackwardPassCounter backward_passes,
               std::string site = std::string())
      : DistributedSampler<>(size, num_replicas, rank, /*allow_duplicates=*/true),
        shuffle_(shuffle),
        backward_passes_(std::move(backward_passes)),
        site_(std::move(site)) {
    populate();
  }

  void reset(c10::optional<size_t> new_size = c10::nullopt) override {
    size_ = new_size.value_or(size_);
    populate();
  }

  c10::optional<std::vector<size_t>> next(size_t batch_size) override {
    size_t end = indices_.size();
    if (end > real_count_ && !has_fed_backward()) end = real_count_;
    if (position_ >= end || batch_size == 0) return c10::nullopt;
    const size_t count = std::min(batch_size, end - position_);
    std::vector<size_t> batch(indices_.begin() + static_cast<std::ptrdiff_t>(position_),
                              indices_.begin() + static_cast<std::ptrdiff_t>(position_ + count));
    position_ += count;
    return batch;
  }

  void save(torch::serialize::OutputArchive& archive) const override {
    archive.write("epoch", torch::tensor(static_cast<int64_t>(epoch_)), /*is_buffer=*/true);
    archive.write("position", torch::tensor(static_cast<int64_t>(position_)), /*is_buffer=*/true);
    archive.write("fed_backward", torch::tensor(static_cast<int64_t>(fed_backward_)),
                  /*is_buffer=*/true);
  }
  // Restores the epoch and the position within it: the next batch is the one
  // the saved sampler would have handed out next.
  void load(torch::serialize::InputArchive& archive) override {
    auto read = [&archive](const char* key) {
      auto value = torch::empty(1, torch::kInt64);
      archive.read(key, value, /*is_buffer=*/true);
      return static_cast<size_t>(value.item<int64_t>());
    };
    epoch_ = read("epoch");
    const size_t position = read("position");
    fed_backward_ = read("fed_backward") != 0;
    populate();
    position_ = std::min(position, indices_.size());
  }

  // Positions of this rank's share already handed out in this pass.
  size_t position() const noexcept { return position_; }
  void set_position(size_t position) noexcept { position_ = std::min(position, indices_.size()); }
  // This rank's samples per pass without and with the padded one.
  size_t real_count() const noexcept { return real_count_; }
  size_t padded_count() const noexcept { return indices_.size(); }

 private:
  void populate() {
    std::vector<size_t> order(size_);
    std::iota(order.begin(), order.end(), size_t{0});
    if (shuffle_) {
      // One generator seeded with the epoch on every rank, as LibTorch's
      // DistributedRandomSampler seeds it: every rank draws the same order.
      std::mt19937 generator(static_cast<std::mt19937::result_type>(epoch_));
      std::shuffle(order.begin(), order.end(), generator);
    }
    const size_t per_rank = (size_ + num_replicas_ - 1) / num_replicas_;
    indices_.clear();
    real_count_ = 0;
    for (size_t i = 0; i < per_rank; ++i) {
      const size_t at = rank_ + i * num_replicas_;
      if (at < size_) ++real_count_;
      if (size_ > 0) indices_.push_back(order[at % size_]);
    }
    position_ = 0;
    backward_passes_at_reset_ = backward_passes_ ? backward_passes_->load() : 0;
    if (!site_.empty()) verify::detail::Recorder::instance().share(site_, size_, real_count_);
  }

  // Sticky: once a pass of this loader has seen a backward pass, it is a
  // training loader for good.
  bool has_fed_backward() {
    if (!fed_backward_ && backward_passes_ && backward_passes_->load() != backward_passes_at_reset_) {
      fed_backward_ = true;
    }
    return fed_backward_;
  }

  bool shuffle_;
  BackwardPassCounter backward_passes_;
  std::vector<size_t> indices_;
  size_t real_count_ = 0;
  size_t position_ = 0;
  uint64_t backward_passes_at_reset_ = 0;
  bool fed_backward_ = false;
  std::string site_;
};

// "loader1", "loader2", ...: the loaders fabric.setup_dataloader made in this
// process, in order (the same on every rank), for fabricize verify's records.
inline std::string next_loader_site() {
  static std::atomic<int> made{0};
  return "loader" + std::to_string(++made);
}

// The sampler each rank uses when the job has several processes:
// RandomSampler -> a shuffled ShardSampler, SequentialSampler -> an ordered
// one, a distributed sampler type -> itself with this rank's shard.
// Anything else cannot be sharded safely.
template <class Sampler>
std::shared_ptr<torch::data::samplers::DistributedSampler<>> make_distributed_sampler(
    size_t dataset_size, size_t world_size, size_t rank, BackwardPassCounter backward_passes,
    std::string site = std::string()) {
  namespace samplers = torch::data::samplers;
  if constexpr (std::is_same<Sampler, samplers::RandomSampler>::value ||
                std::is_same<Sampler, samplers::SequentialSampler>::value) {
    return std::make_shared<ShardSampler>(dataset_size, world_size, rank,
                                          std::is_same<Sampler, samplers::RandomSampler>::value,
                                          std::move(backward_passes), std::move(site));
  } else if constexpr (std::is_base_of<samplers::DistributedSampler<>, Sampler>::value &&
                       std::is_constructible<Sampler, size_t, size_t, size_t>::value) {
    return std::make_shared<Sampler>(dataset_size, world_size, rank);
  } else {
    throw std::invalid_argument(
        "fabric: setup_dataloader cannot shard this sampler type across processes. "
        "Use torch::data::samplers::RandomSampler or SequentialSampler (Fabric "
        "replaces them with their distributed versions), a DistributedSampler "
        "subclass constructible from (size, num_replicas, rank), or run with one "
        "process.");
  }
}

// Loads `saved` (what sampler.save wrote) into `sampler` and moves it to
// `position` within its pass: the samples the program had been handed when
// it saved, whatever the loader's workers had fetched ahead.
inline void restore_sampler(torch::data::samplers::Sampler<>& sampler, torch::serialize::InputArchive& saved,
                            size_t position) {
  namespace samplers = torch::data::samplers;
  if (auto* shard = dynamic_cast<ShardSampler*>(&sampler)) {
    shard->load(saved);
    shard->set_position(position);
    return;
  }
  const bool random = dynamic_cast<samplers::RandomSampler*>(&sampler) != nullptr;
  if (!random && dynamic_cast<samplers::SequentialSampler*>(&sampler) == nullptr) {
    sampler.load(saved);  // a sampler of the program's own: its own position
    return;
  }
  // LibTorch's samplers keep their place as "index" (and their order as
  // "indices"): the same archive with the program's position in it.
  torch::serialize::OutputArchive moved;
  moved.write("index", torch::tensor(static_cast<int64_t>(position), torch::kInt64), /*is_buffer=*/true);
  if (random) {
    torch::Tensor indices;
    saved.read("indices", indices, /*is_buffer=*/true);
    moved.write("indices", indices, /*is_buffer=*/true);
  }
  std::stringstream bytes;
  moved.save_to(bytes);
  torch::serialize::InputArchive reread;
  reread.load_from(bytes);
  sampler.load(reread);
}

}  // namespace detail

template <class Dataset, class BatchRequest = std::vector<size_t>>
class DataLoader final : public detail::StatefulEntry {
 public:
  using BatchType = typename Dataset::BatchType;
  using BatchRequestType = BatchRequest;
  using SamplerType = torch::data::samplers::Sampler<BatchRequest>;
  using DistributedSamplerType = torch::data::samplers::DistributedSampler<BatchRequest>;
  using InnerLoader = torch::data::StatelessDataLoader<Dataset, detail::SharedSampler<BatchRequest>>;

  // An input iterator like torch::data::Iterator; dereferencing moves the
  // current batch to the device (once).
  class Iterator {
   public:
    using difference_type = std::ptrdiff_t;
    using value_type = BatchType;
    using pointer = BatchType*;
    using reference = BatchType&;
    using iterator_category = std::input_iterator_tag;

    Iterator(torch::data::Iterator<BatchType> inner, torch::Device device, size_t* handed_out = nullptr)
        : inner_(std::move(inner)), device_(device), handed_out_(handed_out) {}

    BatchType& operator*() {
      BatchType& batch = *inner_;
      if (!on_device_) {
        batch = detail::move_batch_to_device(batch, device_);
        on_device_ = true;
        if (handed_out_ != nullptr) ++*handed_out_;
      }
      return batch;
    }
    BatchType* operator->() { return &**this; }
    Iterator& operator++() {
      ++inner_;
      on_device_ = false;
      return *this;
    }
    bool operator==(const Iterator& other) const { return inner_ == other.inner_; }
    bool operator!=(const Iterator& other) const { return !(*this == other); }

   private:
    torch::data::Iterator<BatchType> inner_;
    torch::Device device_;
    size_t* handed_out_;  // the loader's count of batches handed out in this pass
    bool on_device_ = false;
  };

  // `distributed_sampler` is `sampler` seen as a distributed sampler, or null
  // when the job has one process.
  DataLoader(Dataset dataset, std::shared_ptr<SamplerType> sampler,
             std::shared_ptr<DistributedSamplerType> distributed_sampler, torch::data::DataLoaderOptions options,
             torch::Device device)
      : sampler_(std::move(sampler)),
        distributed_sampler_(std::move(distributed_sampler)),
        device_(device),
        loader_(std::make_unique<InnerLoader>(
            std::move(dataset), detail::SharedSampler<BatchRequest>(sampler_, restore_), std::move(options))) {}

  // Starts a pass (an epoch) over this rank's share of the data; after
  // fabric.load of a State holding this loader, continues the pass it was
  // saved in, with the batch after the last one the program had been given.
  Iterator begin() {
    if (resume_) {
      resume_ = false;
      if (distributed_sampler_) distributed_sampler_->set_epoch(epoch_ > 0 ? epoch_ - 1 : 0);
    } else {
      if (distributed_sampler_) distributed_sampler_->set_epoch(epoch_);
      ++epoch_;
      handed_out_ = 0;
    }
    return Iterator(loader_->begin(), device_, &handed_out_);
  }
  Iterator end() { return Iterator(loader_->end(), device_); }

  void join() { loader_->join(); }
  const torch::data::FullDataLoaderOptions& options() const noexcept { return loader_->options(); }
  // Number of passes started so far.
  size_t epoch() const noexcept { return epoch_; }
  // Batches handed to the program in the current pass.
  size_t batches_handed_out() const noexcept { return handed_out_; }
  SamplerType& sampler() noexcept { return *sampler_; }
  const torch::Device& device() const noexcept { return device_; }

  // fabric::State: the passes started, the batches handed out in the last
  // one, and the sampler (its order and place).
  void save_state(torch::serialize::OutputArchive& archive) const override {
    archive.write("epoch", c10::IValue(static_cast<int64_t>(epoch_)));
    archive.write("batches_handed_out", c10::IValue(static_cast<int64_t>(handed_out_)));
    archive.write("batch_size", c10::IValue(static_cast<int64_t>(loader_->options().batch_size)));
    torch::serialize::OutputArchive sampler;
    sampler_->save(sampler);
    archive.write("sampler", sampler);
  }
  void load_state(torch::serialize::InputArchive& archive) override {
    c10::IValue epoch, handed_out, batch_size;
    archive.read("epoch", epoch);
    archive.read("batches_handed_out", handed_out);
    archive.read("batch_size", batch_size);
    if (batch_size.toInt() != static_cast<int64_t>(loader_->options().batch_size)) {
      throw std::invalid_argument("the loader was saved with batch size " + std::to_string(batch_size.toInt()) +
                                  ", this one has " + std::to_string(loader_->options().batch_size) +
                                  ": its position cannot be restored");
    }
    auto saved = std::make_shared<torch::serialize::InputArchive>();
    archive.read("sampler", *saved);
    epoch_ = static_cast<size_t>(epoch.toInt());
    handed_out_ = static_cast<size_t>(handed_out.toInt());
    resume_ = epoch_ > 0;
    const size_t position = handed_out_ * loader_->options().batch_size;
    auto sampler = sampler_;
    if constexpr (std::is_same<BatchRequest, std::vector<size_t>>::value) {
      *restore_ = [sampler, saved, position] { detail::restore_sampler(*sampler, *saved, position); };
    } else {
      *restore_ = [sampler, saved] { sampler->load(*saved); };
    }
  }

 private:
  std::shared_ptr<SamplerType> sampler_;
  std::shared_ptr<DistributedSamplerType> distributed_sampler_;
  torch::Device device_;
  size_t epoch_ = 0;
  size_t handed_out_ = 0;
  bool resume_ = false;
  std::shared_ptr<std::function<void()>> restore_ = std::make_shared<std::function<void()>>();
  std::unique_ptr<InnerLoader> loader_;
};

}  // namespace fabric
