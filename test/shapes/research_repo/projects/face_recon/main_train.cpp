// Trains the face reconstruction regressor on synthetic faces.
//   ./face_recon [key=value ...]   (see the defaults below)
#include <iostream>

#include <torch/torch.h>

#include "datasets.h"
#include "trainer.h"
#include "utils/config.h"
#include "utils/logging.h"

int main(int argc, char** argv) {
  torch::manual_seed(2023);

  utils::Config cfg({
      {"code_dim", "10"},
      {"lr", "2e-3"},
      {"batch_size", "32"},
      {"max_steps", "400"},
      {"val_steps", "50"},
      {"checkpoint_steps", "100"},
      {"vis_steps", "200"},
      {"train_size", "1024"},
      {"val_size", "128"},
      {"test_size", "256"},
      {"noise", "0.3"},
      {"w_code", "1e-3"},
      {"checkpoint", "model.tar"},
      {"pretrained_encoder", "encoder_pretrained.pt"},
      {"train_log", "train.log"},
      {"val_log", "val_losses.csv"},
  });
  cfg.parse_args(argc, argv);

  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  const auto face_basis = FaceBasis::generate(16, cfg.get_int("code_dim"));
  const FaceDataset test_set(face_basis, cfg.get_int("test_size"), cfg.get_float("noise"));

  Trainer trainer(cfg, face_basis, device);
  trainer.fit();

  const auto [test_loss, test_psnr] = trainer.evaluate(test_set);
  std::cout << "test loss " << utils::fmt(test_loss) << " psnr " << utils::fmt(test_psnr, 2) << std::endl;
  return 0;
}
