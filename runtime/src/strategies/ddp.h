// "ddp": one c10d::Reducer per set-up model, a bucketed gradient all-reduce
// overlapped with backward (PyTorch's DistributedDataParallel).
#pragma once

#include "strategies/strategy.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fabric {
namespace detail {

// DDP's gradient synchronization; also the all-reduce of "zero1".
class DdpStrategy : public Strategy {
 public:
  explicit DdpStrategy(const StrategyContext& context);
  ~DdpStrategy() override;
  void setup_module(const torch::nn::Module& module, const NamedParameters& trained) override;
  // The model's Reducer is replaced by one over `trained` (none when it is
  // empty). Gradients a no_backward_sync window accumulated so far are
  // still averaged at its end.
  void trained_parameters_changed(const torch::nn::Module* module, const NamedParameters& trained) override;
  bool needs_reached_models() const override { return !reducers_.empty(); }
  void check_backward(const std::vector<ReachedModel>& models) const override;
  void before_backward(const std::vector<ReachedModel>& models, const at::Tensor& loss) override;
  void after_backward(const std::vector<ReachedModel>& models) override;
  void forget_module(const torch::nn::Module* module) override;

 private:
  struct ModelReducer {
    const torch::nn::Module* module = nullptr;
    NamedParameters parameters;  // what the Reducer waits for, in its order
    std::shared_ptr<c10d::Reducer> reducer;
    // Declared after the Reducer, so destroyed before it (its destructor
    // reads the Reducer). See setup_module.
    std::shared_ptr<c10d::Logger> logger;
    // find_unused_parameters where the Reducer ignores backward passes under
    // no_backward_sync (c10d_compat::kReducerCountsUsageUnderNoSync): which
    // parameters such passes reached since the last synchronized backward,
    // and which the synchronized backward now running reaches.
    std::vector<char> reached_without_sync;
    std::vector<char> reached_by_sync;
    bool accumulated = false;  // a backward ran under no_backward_sync since the last sync
    bool average_after_backward = false;
    // Whether its Reducer searches each backward's graph for unused
    // parameters: the option, or turned on by the first synchronized
    // backward (see agree_on_unused_parameters).
    bool find_unused = false;
    bool synchronized_once = false;
  };
  // A Reducer (and its c10d::Logger) over `trained`, which is not empty.
  ModelReducer make_model_reducer(const torch::nn::Module* module, const NamedParameters& trained, bool find_unused);
  // The first synchronized backward of a model whose find_unused_parameters
  // nobody chose: the ranks compare the trained parameters it reaches on
  // none of them. The same set everywhere turns the search on for that
  // model (rank 0 says so, once); different sets throw on every rank.
  void agree_on_unused_parameters(ModelReducer& model, const ReachedModel& reached);
  // check_backward's message for parameters a backward does not reach.
  std::string unreached_message(const std::vector<std::string>& unreached) const;
  bool noted_unused_parameters_ = false;
  // Records what backward passes reach, for the case above.
  void note_reached_parameters(const std::vector<ReachedModel>& models);
  // After the synchronized backward: averages across ranks the gradients
  // of the parameters some rank used under no_backward_sync that the
  // synchronized backward reached on no rank (the Reducer left them local).
  void average_gradients_used_only_without_sync(ModelReducer& model);
  std::vector<ModelReducer> reducers_;
};

// DDP's bucket sizes for `options` (bytes): the first bucket, the others.
std::pair<size_t, size_t> bucket_bytes(const Options& options);

}  // namespace detail
}  // namespace fabric
