#ifndef SURFACE_FIT_NET_H
#define SURFACE_FIT_NET_H

#include <torch/torch.h>

namespace surface {

// MLP for a scalar field over the plane.
struct Net : torch::nn::Module {
  explicit Net(int hidden);
  torch::Tensor forward(torch::Tensor x);

  torch::nn::Linear input{nullptr}, hidden1{nullptr}, output{nullptr};
};

// z = sin(x) * cos(y) sampled on [-2, 2]^2 with noise of std 0.3
class SurfaceData : public torch::data::datasets::Dataset<SurfaceData> {
 public:
  explicit SurfaceData(long n);
  torch::data::Example<> get(size_t i) override;
  torch::optional<size_t> size() const override;

 private:
  torch::Tensor xy_, z_;
};

}  // namespace surface

#endif
