// A tiny 1-D GAN: the generator learns to turn Gaussian noise into samples of
// N(2, 0.5^2). Two modules, two optimizers, alternating D and G steps.
#include <torch/torch.h>

#include <cstdio>

const int64_t kLatent = 4;

struct GeneratorImpl : torch::nn::Module {
  torch::nn::Sequential main{nullptr};
  GeneratorImpl() {
    main = register_module("main", torch::nn::Sequential(torch::nn::Linear(kLatent, 16),
                                                         torch::nn::ReLU(),
                                                         torch::nn::Linear(16, 1)));
  }
  torch::Tensor forward(torch::Tensor z) { return main->forward(z); }
};
TORCH_MODULE(Generator);

struct DiscriminatorImpl : torch::nn::Module {
  torch::nn::Sequential main{nullptr};
  DiscriminatorImpl() {
    main = register_module(
        "main", torch::nn::Sequential(
                    torch::nn::Linear(1, 32),
                    torch::nn::LeakyReLU(torch::nn::LeakyReLUOptions().negative_slope(0.2)),
                    torch::nn::Linear(32, 1)));
  }
  torch::Tensor forward(torch::Tensor x) { return main->forward(x); }  // logits
};
TORCH_MODULE(Discriminator);

// Real samples only: the target of a GAN batch is unused.
struct RealSamples : torch::data::datasets::Dataset<RealSamples> {
  torch::Tensor samples;
  explicit RealSamples(int64_t n) : samples(2.0 + 0.5 * torch::randn({n, 1})) {}
  torch::data::Example<> get(size_t i) override { return {samples[i], torch::zeros({1})}; }
  torch::optional<size_t> size() const override { return samples.size(0); }
};

// 1-D Wasserstein distance between two equally sized samples.
float wasserstein_1d(const torch::Tensor& a, const torch::Tensor& b) {
  auto sa = std::get<0>(a.flatten().sort());
  auto sb = std::get<0>(b.flatten().sort());
  return (sa - sb).abs().mean().item<float>();
}

int main() {
  torch::manual_seed(123);
  torch::Device device(torch::cuda::is_available() ? torch::kCUDA : torch::kCPU);

  auto loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      RealSamples(2048).map(torch::data::transforms::Stack<>()), 64);
  // Held-out real samples and a fixed batch of noise to measure the generator.
  auto reference = (2.0 + 0.5 * torch::randn({1024, 1})).to(device);
  auto fixed_noise = torch::randn({1024, kLatent}).to(device);

  Generator netG;
  Discriminator netD;
  netG->to(device);
  netD->to(device);

  torch::optim::Adam optimizerG(netG->parameters(), torch::optim::AdamOptions(2e-3).betas({0.5, 0.999}));
  torch::optim::Adam optimizerD(netD->parameters(), torch::optim::AdamOptions(2e-3).betas({0.5, 0.999}));

  // Halve both learning rates every 15 epochs so the two players settle down.
  torch::optim::StepLR schedulerG(optimizerG, /*step_size=*/15, /*gamma=*/0.5);
  torch::optim::StepLR schedulerD(optimizerD, /*step_size=*/15, /*gamma=*/0.5);

  for (int epoch = 1; epoch <= 50; ++epoch) {
    double d_sum = 0, g_sum = 0;
    int batches = 0;
    for (auto& batch : *loader) {
      auto real = batch.data.to(device);
      const auto n = real.size(0);

      // (1) Update D: maximize log(D(x)) + log(1 - D(G(z)))
      netD->zero_grad();
      auto real_labels = torch::ones({n, 1}, device);
      auto fake_labels = torch::zeros({n, 1}, device);
      auto d_real = torch::binary_cross_entropy_with_logits(netD->forward(real), real_labels);
      auto noise = torch::randn({n, kLatent}, device);
      auto fake = netG->forward(noise);
      auto d_fake = torch::binary_cross_entropy_with_logits(netD->forward(fake.detach()), fake_labels);
      auto d_loss = d_real + d_fake;
      d_loss.backward();
      optimizerD.step();

      // (2) Update G: maximize log(D(G(z)))
      netG->zero_grad();
      auto g_loss = torch::binary_cross_entropy_with_logits(netD->forward(fake), real_labels);
      g_loss.backward();
      optimizerG.step();

      d_sum += d_loss.item<double>();
      g_sum += g_loss.item<double>();
      ++batches;
    }

    schedulerG.step();
    schedulerD.step();

    torch::NoGradGuard no_grad;
    const float w1 = wasserstein_1d(netG->forward(fixed_noise), reference);
    // "loss" here is the distance of the generated distribution to the real one.
    std::printf("epoch %d loss %.4f loss_d %.4f loss_g %.4f\n", epoch, w1, d_sum / batches,
                g_sum / batches);
  }

  torch::NoGradGuard no_grad;
  auto samples = netG->forward(fixed_noise);
  std::printf("test loss %.4f mean %.3f std %.3f\n", wasserstein_1d(samples, reference),
              samples.mean().item<float>(), samples.std().item<float>());
  return 0;
}
