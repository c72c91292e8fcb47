#ifndef SURFACE_FIT_TRAINER_H
#define SURFACE_FIT_TRAINER_H

#include <torch/torch.h>

#include <memory>

#include "config.h"
#include "net.h"

namespace surface {

class Trainer {
 public:
  Trainer(std::shared_ptr<Net> model, std::shared_ptr<torch::optim::Optimizer> optimizer,
          torch::Device device, Config config);

  void train(const SurfaceData& data);
  double test(const SurfaceData& data);

 private:
  std::shared_ptr<Net> model_;
  std::shared_ptr<torch::optim::Optimizer> optimizer_;
  torch::Device device_;
  Config config_;
};

}  // namespace surface

#endif
