#include "factory.h"

#include <stdexcept>

namespace surface {

Trainer make_trainer(const Config& config) {
  torch::Device device = torch::kCPU;
  if (torch::cuda::is_available()) {
    device = torch::Device(torch::kCUDA, 0);
  }

  auto model = std::make_shared<Net>(config.hidden);
  model->to(device);

  std::shared_ptr<torch::optim::Optimizer> optimizer;
  if (config.optimizer == "adam") {
    optimizer = std::make_shared<torch::optim::Adam>(model->parameters(),
                                                     torch::optim::AdamOptions(config.lr));
  } else if (config.optimizer == "sgd") {
    optimizer = std::make_shared<torch::optim::SGD>(
        model->parameters(), torch::optim::SGDOptions(config.lr).momentum(0.9));
  } else {
    throw std::invalid_argument("unknown optimizer: " + config.optimizer);
  }
  return Trainer(model, optimizer, device, config);
}

}  // namespace surface
