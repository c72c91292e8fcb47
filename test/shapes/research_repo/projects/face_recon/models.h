#pragma once
// The reconstruction network: a frozen image encoder (pretrained weights in
// the real thing), a trainable regressor from its features to the face code,
// and the fixed linear face model that renders the code back to an image and
// its landmarks.
#include <torch/torch.h>

#include "datasets.h"

struct EncoderImpl : torch::nn::Module {
  EncoderImpl();
  torch::Tensor forward(torch::Tensor images);  // [N, 1, 16, 16] -> [N, 512]

  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
};
TORCH_MODULE(Encoder);

struct RegressorImpl : torch::nn::Module {
  RegressorImpl(int64_t features, int64_t hidden, int64_t code_dim);
  torch::Tensor forward(torch::Tensor features);

  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Regressor);

struct FaceModelImpl : torch::nn::Module {
  explicit FaceModelImpl(const FaceBasis& basis);
  // Code -> (image [N, 1, side, side], landmarks [N, 12]).
  std::pair<torch::Tensor, torch::Tensor> forward(torch::Tensor code);

  torch::Tensor mean, basis, landmark_basis;
  int64_t side;
};
TORCH_MODULE(FaceModel);

struct Reconstruction {
  torch::Tensor code, image, landmarks;
};

struct ReconNetImpl : torch::nn::Module {
  ReconNetImpl(const FaceBasis& basis, int64_t code_dim);
  Reconstruction forward(torch::Tensor images);

  Encoder encoder{nullptr};
  Regressor regressor{nullptr};
  FaceModel face_model{nullptr};
};
TORCH_MODULE(ReconNet);
