#include "datasets.h"

FaceBasis FaceBasis::generate(int64_t side, int64_t code_dim) {
  FaceBasis m;
  m.side = side;
  auto ys = torch::linspace(-1, 1, side).view({side, 1});
  auto xs = torch::linspace(-1, 1, side).view({1, side});
  // A bright oval on a dark background, and smooth random deformations.
  m.mean = (1.0 - 1.5 * (xs.pow(2) + 1.5 * ys.pow(2))).reshape({-1});
  m.basis = torch::randn({side * side, code_dim}) * 0.6;
  m.basis = torch::nn::functional::avg_pool2d(
                m.basis.t().reshape({code_dim, 1, side, side}),
                torch::nn::functional::AvgPool2dFuncOptions(3).stride(1).padding(1))
                .reshape({code_dim, -1})
                .t()
                .contiguous() * 2.0;
  m.landmarks = torch::randn({12, code_dim}) * 0.25;
  return m;
}

FaceDataset::FaceDataset(const FaceBasis& face_model, int64_t size, double noise) {
  auto codes = torch::randn({size, face_model.basis.size(1)});
  auto clean = torch::sigmoid(face_model.mean + codes.matmul(face_model.basis.t()));
  images_ = (clean + noise * torch::randn_like(clean)).view({size, 1, face_model.side, face_model.side});
  landmarks_ = codes.matmul(face_model.landmarks.t()) + noise * torch::randn({size, 12});
}

torch::data::Example<> FaceDataset::get(size_t index) {
  return {images_[index], landmarks_[index]};
}

torch::optional<size_t> FaceDataset::size() const { return images_.size(0); }
