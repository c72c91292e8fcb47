#include "models.h"

#include "utils/image_ops.h"

namespace F = torch::nn::functional;

EncoderImpl::EncoderImpl() {
  conv1 = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 16, 3).stride(2).padding(1)));
  conv2 = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(16, 32, 3).stride(2).padding(1)));
}

torch::Tensor EncoderImpl::forward(torch::Tensor images) {
  auto x = utils::normalize(images, {0.5}, {0.5});
  x = torch::relu(conv1(x));
  x = torch::relu(conv2(x));
  return x.flatten(1);
}

RegressorImpl::RegressorImpl(int64_t features, int64_t hidden, int64_t code_dim) {
  fc1 = register_module("fc1", torch::nn::Linear(features, hidden));
  fc2 = register_module("fc2", torch::nn::Linear(hidden, hidden));
  fc3 = register_module("fc3", torch::nn::Linear(hidden, code_dim));
}

torch::Tensor RegressorImpl::forward(torch::Tensor features) {
  return fc3(torch::relu(fc2(torch::relu(fc1(features)))));
}

FaceModelImpl::FaceModelImpl(const FaceBasis& b) : side(b.side) {
  mean = register_buffer("mean", b.mean.clone());
  basis = register_buffer("basis", b.basis.clone());
  landmark_basis = register_buffer("landmark_basis", b.landmarks.clone());
}

std::pair<torch::Tensor, torch::Tensor> FaceModelImpl::forward(torch::Tensor code) {
  auto image = torch::sigmoid(mean + code.matmul(basis.t())).view({-1, 1, side, side});
  return {image, code.matmul(landmark_basis.t())};
}

ReconNetImpl::ReconNetImpl(const FaceBasis& basis, int64_t code_dim) {
  encoder = register_module("encoder", Encoder());
  const int64_t features = 32 * (basis.side / 4) * (basis.side / 4);
  regressor = register_module("regressor", Regressor(features, 64, code_dim));
  face_model = register_module("face_model", FaceModel(basis));
}

Reconstruction ReconNetImpl::forward(torch::Tensor images) {
  Reconstruction r;
  r.code = regressor(encoder(images));
  std::tie(r.image, r.landmarks) = face_model(r.code);
  return r;
}
