#include "net.h"

namespace surface {

Net::Net(int hidden) {
  input = register_module("input", torch::nn::Linear(2, hidden));
  hidden1 = register_module("hidden1", torch::nn::Linear(hidden, hidden));
  output = register_module("output", torch::nn::Linear(hidden, 1));
}

torch::Tensor Net::forward(torch::Tensor x) {
  x = torch::tanh(input->forward(x));
  x = torch::tanh(hidden1->forward(x));
  return output->forward(x);
}

SurfaceData::SurfaceData(long n) : xy_(torch::rand({n, 2}) * 4 - 2) {
  z_ = (torch::sin(xy_.select(1, 0)) * torch::cos(xy_.select(1, 1))).unsqueeze(1) +
       0.3 * torch::randn({n, 1});
}

torch::data::Example<> SurfaceData::get(size_t i) { return {xy_[i], z_[i]}; }

torch::optional<size_t> SurfaceData::size() const { return xy_.size(0); }

}  // namespace surface
