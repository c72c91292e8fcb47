// The training loop. With several GPUs the forward pass is split over them
// (forward_on, model.h).
#pragma once
#include <torch/torch.h>

#include <vector>

#include "model.h"

struct TrainConfig {
  int epochs = 8;
  int64_t batch_size = 64;
  double lr = 3e-3;
};

class Trainer {
 public:
  Trainer(WaveNet model, torch::optim::Optimizer& optimizer, torch::Device device);

  // One pass over the loader; returns the mean batch loss.
  template <typename Loader>
  double train_epoch(Loader& loader) {
    model_->train();
    double total = 0;
    int64_t batches = 0;
    for (auto& batch : loader) {
      torch::Tensor x = batch.data.to(device_);
      torch::Tensor y = batch.target.to(device_);
      optimizer_.zero_grad();
      torch::Tensor loss = torch::mse_loss(forward_on(model_, x, gpus_, device_), y);
      loss.backward();
      optimizer_.step();
      total += loss.item<double>();
      ++batches;
    }
    return total / batches;
  }

 private:
  WaveNet model_;
  torch::optim::Optimizer& optimizer_;
  torch::Device device_;
  std::vector<torch::Device> gpus_;
};
