#pragma once
// Synthetic "faces": every image is rendered from a random code through a
// linear face model (a mean image plus a basis, like a 3DMM), squashed to
// [0, 1] and observed with pixel noise; six 2-D landmarks are a linear
// function of the same code, observed with noise too.
#include <torch/torch.h>

struct FaceBasis {
  torch::Tensor mean;       // [pixels]
  torch::Tensor basis;      // [pixels, code_dim]
  torch::Tensor landmarks;  // [12, code_dim]
  int64_t side;

  static FaceBasis generate(int64_t side, int64_t code_dim);
};

class FaceDataset : public torch::data::datasets::Dataset<FaceDataset> {
 public:
  // Images are [1, side, side]; the target holds the 12 landmark coordinates.
  FaceDataset(const FaceBasis& face_model, int64_t size, double noise);

  torch::data::Example<> get(size_t index) override;
  torch::optional<size_t> size() const override;

 private:
  torch::Tensor images_;
  torch::Tensor landmarks_;
};
