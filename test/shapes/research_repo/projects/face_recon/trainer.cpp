#include "trainer.h"

#include <fstream>
#include <iostream>

#include "utils/image_ops.h"
#include "utils/metrics.h"

namespace F = torch::nn::functional;

namespace {
bool file_exists(const std::string& path) { return std::ifstream(path).good(); }
}  // namespace

Trainer::Trainer(const utils::Config& cfg, const FaceBasis& face_basis, torch::Device device)
    : cfg_(cfg),
      face_basis_(face_basis),
      device_(device),
      model_(face_basis, cfg.get_int("code_dim")),
      optimizer_(model_->regressor->parameters(), torch::optim::AdamOptions(cfg.get_float("lr"))),
      batch_size_(cfg.get_int("batch_size")),
      max_steps_(cfg.get_int("max_steps")),
      val_steps_(cfg.get_int("val_steps")),
      checkpoint_steps_(cfg.get_int("checkpoint_steps")),
      vis_steps_(cfg.get_int("vis_steps")),
      checkpoint_path_(cfg.get("checkpoint")) {
  // The encoder comes pretrained and stays frozen: only the regressor learns.
  const auto pretrained = cfg_.get("pretrained_encoder");
  if (file_exists(pretrained)) {
    torch::load(model_->encoder, pretrained);
  } else {
    std::cerr << "no pretrained encoder at " << pretrained << ", keeping its initial weights" << std::endl;
  }
  for (auto& p : model_->encoder->parameters()) p.requires_grad_(false);
  model_->to(device_);
  train_log_.open(cfg_.get("train_log"));
}

void Trainer::prepare_data() {
  const double noise = cfg_.get_float("noise");
  auto train_set = FaceDataset(face_basis_, cfg_.get_int("train_size"), noise);
  auto val_set = FaceDataset(face_basis_, cfg_.get_int("val_size"), noise);
  val_size_ = *val_set.size();
  train_loader_ = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      train_set.map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(batch_size_).drop_last(true));
  val_loader_ = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      val_set.map(torch::data::transforms::Stack<>()), torch::data::DataLoaderOptions().batch_size(64));
  val_log_ = std::make_unique<utils::CsvLogger>(cfg_.get("val_log"),
                                                std::vector<std::string>{"step", "train_loss", "val_loss"});
}

LossDict Trainer::compute_losses(const Reconstruction& out, const torch::Tensor& images,
                                 const torch::Tensor& landmarks) {
  LossDict losses;
  losses.photometric = F::mse_loss(out.image, images);
  losses.landmark = F::mse_loss(out.landmarks, landmarks);
  losses.regularizer = out.code.pow(2).mean() * cfg_.get_float("w_code");
  losses.total = losses.photometric + losses.landmark + losses.regularizer;
  return losses;
}

void Trainer::save_checkpoint(int64_t step) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_archive, optimizer_archive;
  model_->save(model_archive);
  optimizer_.save(optimizer_archive);
  archive.write("model", model_archive);
  archive.write("opt", optimizer_archive);
  archive.write("global_step", torch::tensor(step));
  archive.save_to(checkpoint_path_);
}

int64_t Trainer::load_checkpoint() {
  if (!file_exists(checkpoint_path_)) return 0;
  torch::serialize::InputArchive archive;
  archive.load_from(checkpoint_path_, device_);
  torch::serialize::InputArchive model_archive, optimizer_archive;
  archive.read("model", model_archive);
  archive.read("opt", optimizer_archive);
  model_->load(model_archive);
  optimizer_.load(optimizer_archive);
  torch::Tensor step;
  archive.read("global_step", step);
  std::cout << "resume training from " << checkpoint_path_ << " at step " << step.item<int64_t>() << std::endl;
  return step.item<int64_t>();
}

double Trainer::validation_step() {
  torch::NoGradGuard no_grad;
  model_->eval();
  double total = 0;
  for (auto& batch : *val_loader_) {
    auto images = batch.data.to(device_);
    auto landmarks = batch.target.to(device_);
    auto losses = compute_losses(model_->forward(images), images, landmarks);
    total += (losses.photometric + losses.landmark).item<double>() * images.size(0);
  }
  model_->train();
  return total / val_size_;
}

void Trainer::fit() {
  prepare_data();
  const int64_t start_step = load_checkpoint();
  const int64_t iters_per_epoch = cfg_.get_int("train_size") / batch_size_;
  int64_t epoch = start_step / iters_per_epoch;

  model_->train();
  utils::AverageMeter loss_meter;
  auto it = train_loader_->begin();
  for (int64_t step = start_step; step < max_steps_; ++step) {
    if (it == train_loader_->end()) {
      it = train_loader_->begin();
      ++epoch;
    }
    auto batch = *it;
    ++it;
    auto images = batch.data.to(device_);
    auto landmarks = batch.target.to(device_);

    auto out = model_->forward(images);
    auto losses = compute_losses(out, images, landmarks);
    optimizer_.zero_grad();
    losses.total.backward();
    optimizer_.step();

    const double loss = losses.total.item<double>();
    loss_meter.update(loss);
    train_log_ << "step " << step << " photometric " << losses.photometric.item<double>() << " landmark "
               << losses.landmark.item<double>() << " total " << loss << "\n";

    if ((step + 1) % val_steps_ == 0) {
      const double val_loss = validation_step();
      std::cout << "epoch " << epoch << " step " << step + 1 << " loss " << utils::fmt(loss_meter.avg())
                << " val_loss " << utils::fmt(val_loss) << std::endl;
      val_log_->write({static_cast<double>(step + 1), loss_meter.avg(), val_loss});
      loss_meter.reset();
    }
    if ((step + 1) % vis_steps_ == 0) {
      utils::save_preview(torch::cat({images, out.image.detach()}, 3),
                          "preview_" + std::to_string(step + 1) + ".pt");
    }
    if ((step + 1) % checkpoint_steps_ == 0) {
      save_checkpoint(step + 1);
    }
  }
  train_log_.flush();
}

std::pair<double, double> Trainer::evaluate(const FaceDataset& data) {
  torch::NoGradGuard no_grad;
  model_->eval();
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      FaceDataset(data).map(torch::data::transforms::Stack<>()), 128);
  double loss = 0, psnr = 0;
  int64_t n = 0;
  for (auto& batch : *loader) {
    auto images = batch.data.to(device_);
    auto landmarks = batch.target.to(device_);
    auto out = model_->forward(images);
    auto losses = compute_losses(out, images, landmarks);
    loss += (losses.photometric + losses.landmark).item<double>() * images.size(0);
    psnr += utils::psnr(out.image, images) * images.size(0);
    n += images.size(0);
  }
  return {loss / n, psnr / n};
}
