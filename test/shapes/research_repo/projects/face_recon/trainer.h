#pragma once
// Iteration-based trainer: it runs `max_steps` optimizer steps, pulling
// batches from its loader and starting a new pass whenever one ends,
// validates every `val_steps`, checkpoints every `checkpoint_steps` and
// resumes from the checkpoint when one exists.
#include <fstream>
#include <memory>
#include <string>

#include <torch/torch.h>

#include "datasets.h"
#include "models.h"
#include "utils/config.h"
#include "utils/logging.h"

using TrainSet = torch::data::datasets::MapDataset<FaceDataset, torch::data::transforms::Stack<>>;
using TrainLoader = torch::data::StatelessDataLoader<TrainSet, torch::data::samplers::RandomSampler>;
using ValLoader = torch::data::StatelessDataLoader<TrainSet, torch::data::samplers::SequentialSampler>;

struct LossDict {
  torch::Tensor photometric, landmark, regularizer, total;
};

class Trainer {
 public:
  Trainer(const utils::Config& cfg, const FaceBasis& face_basis, torch::Device device);

  void prepare_data();
  void fit();
  // Mean photometric + landmark loss over a data set.
  std::pair<double, double> evaluate(const FaceDataset& data);

 private:
  LossDict compute_losses(const Reconstruction& out, const torch::Tensor& images,
                          const torch::Tensor& landmarks);
  double validation_step();
  void save_checkpoint(int64_t step);
  int64_t load_checkpoint();

  utils::Config cfg_;
  FaceBasis face_basis_;
  torch::Device device_;
  ReconNet model_;
  torch::optim::Adam optimizer_;

  std::unique_ptr<TrainLoader> train_loader_;
  std::unique_ptr<ValLoader> val_loader_;
  int64_t val_size_ = 0;

  int64_t batch_size_;
  int64_t max_steps_;
  int64_t val_steps_;
  int64_t checkpoint_steps_;
  int64_t vis_steps_;
  std::string checkpoint_path_;

  std::ofstream train_log_;
  std::unique_ptr<utils::CsvLogger> val_log_;
};
