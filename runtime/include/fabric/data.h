// fabric::DataLoader: what Fabric::setup_dataloader returns. It behaves like
// the torch::data loader it replaces (range-for, begin/end, join, options),
// and in addition
//  - starts every pass with set_epoch(n) on a distributed sampler, so each
//    epoch is shuffled differently (as Lightning's Fabric loader does);
//  - hands out batches already moved to the Fabric's device (to_device).
#pragma once

#include <fabric/to_device.h>

#include <torch/torch.h>

#include <cstddef>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace fabric {
namespace detail {

// torch::data::make_data_loader stores its sampler by value, so set_epoch on
// any sampler kept outside would change a copy nobody uses. The loader gets
// this forwarder instead, and both sides share the one real sampler.
template <class BatchRequest>
class SharedSampler final : public torch::data::samplers::Sampler<BatchRequest> {
 public:
  explicit SharedSampler(std::shared_ptr<torch::data::samplers::Sampler<BatchRequest>> sampler)
      : sampler_(std::move(sampler)) {}

  void reset(c10::optional<size_t> new_size = c10::nullopt) override {
    sampler_->reset(new_size);
  }
  c10::optional<BatchRequest> next(size_t batch_size) override {
    return sampler_->next(batch_size);
  }
  void save(torch::serialize::OutputArchive& archive) const override { sampler_->save(archive); }
  void load(torch::serialize::InputArchive& archive) override { sampler_->load(archive); }

 private:
  std::shared_ptr<torch::data::samplers::Sampler<BatchRequest>> sampler_;
};

// The sampler each rank uses when the job has several processes:
// RandomSampler -> DistributedRandomSampler, SequentialSampler ->
// DistributedSequentialSampler, a distributed sampler type -> itself with
// this rank's shard. Anything else cannot be sharded safely.
template <class Sampler>
std::shared_ptr<torch::data::samplers::DistributedSampler<>> make_distributed_sampler(
    size_t dataset_size, size_t world_size, size_t rank) {
  namespace samplers = torch::data::samplers;
  if constexpr (std::is_same<Sampler, samplers::RandomSampler>::value) {
    // allow_duplicates pads the last shard as PyTorch's DistributedSampler
    // does, so every rank runs the same number of steps (else the ranks with
    // one batch fewer would leave the others waiting in all-reduce).
    return std::make_shared<samplers::DistributedRandomSampler>(dataset_size, world_size, rank,
                                                                /*allow_duplicates=*/true);
  } else if constexpr (std::is_same<Sampler, samplers::SequentialSampler>::value) {
    return std::make_shared<samplers::DistributedSequentialSampler>(
        dataset_size, world_size, rank, /*allow_duplicates=*/true);
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

} // namespace detail

template <class Dataset, class BatchRequest = std::vector<size_t>>
class DataLoader {
 public:
  using BatchType = typename Dataset::BatchType;
  using BatchRequestType = BatchRequest;
  using SamplerType = torch::data::samplers::Sampler<BatchRequest>;
  using DistributedSamplerType = torch::data::samplers::DistributedSampler<BatchRequest>;
  using InnerLoader =
      torch::data::StatelessDataLoader<Dataset, detail::SharedSampler<BatchRequest>>;

  // An input iterator like torch::data::Iterator; dereferencing moves the
  // current batch to the device (once).
  class Iterator {
   public:
    using difference_type = std::ptrdiff_t;
    using value_type = BatchType;
    using pointer = BatchType*;
    using reference = BatchType&;
    using iterator_category = std::input_iterator_tag;

    Iterator(torch::data::Iterator<BatchType> inner, torch::Device device)
        : inner_(std::move(inner)), device_(device) {}

    BatchType& operator*() {
      BatchType& batch = *inner_;
      if (!on_device_) {
        batch = detail::move_batch_to_device(batch, device_);
        on_device_ = true;
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
    bool on_device_ = false;
  };

  // `distributed_sampler` is `sampler` seen as a distributed sampler, or null
  // when the job has one process.
  DataLoader(Dataset dataset, std::shared_ptr<SamplerType> sampler,
             std::shared_ptr<DistributedSamplerType> distributed_sampler,
             torch::data::DataLoaderOptions options, torch::Device device)
      : sampler_(std::move(sampler)),
        distributed_sampler_(std::move(distributed_sampler)),
        device_(device),
        loader_(std::make_unique<InnerLoader>(std::move(dataset),
                                              detail::SharedSampler<BatchRequest>(sampler_),
                                              std::move(options))) {}

  // Starts a pass (an epoch) over this rank's share of the data.
  Iterator begin() {
    if (distributed_sampler_) distributed_sampler_->set_epoch(epoch_);
    ++epoch_;
    return Iterator(loader_->begin(), device_);
  }
  Iterator end() { return Iterator(loader_->end(), device_); }

  void join() { loader_->join(); }
  const torch::data::FullDataLoaderOptions& options() const noexcept {
    return loader_->options();
  }
  // Number of passes started so far.
  size_t epoch() const noexcept { return epoch_; }
  SamplerType& sampler() noexcept { return *sampler_; }
  const torch::Device& device() const noexcept { return device_; }

 private:
  std::shared_ptr<SamplerType> sampler_;
  std::shared_ptr<DistributedSamplerType> distributed_sampler_;
  torch::Device device_;
  size_t epoch_ = 0;
  std::unique_ptr<InnerLoader> loader_;
};

} // namespace fabric
