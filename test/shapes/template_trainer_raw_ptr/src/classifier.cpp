#include "classifier.h"

Classifier::Classifier()
    : device_(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU),
      net_(8, 64, 2),
      optimizer_(net_->parameters(), torch::optim::SGDOptions(0.05).momentum(0.9).nesterov(true)) {
  net_->to(device_);
}
