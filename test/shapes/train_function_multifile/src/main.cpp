#include <torch/torch.h>

#include <cstdio>

#include "dataset.h"
#include "net.h"
#include "options.h"
#include "synth.h"
#include "train.h"

int main() {
  torch::manual_seed(8);

  Options opts;
  if (torch::cuda::is_available()) {
    opts.device = torch::Device(torch::kCUDA);
  }

  auto signatures = torch::randn({kFaults, kSensors});
  auto [train_x, train_y] = make_readings(signatures, opts.n_train, 0.1);
  auto [test_x, test_y] = make_readings(signatures, opts.n_test, 0.1);
  DataSet train_set(train_x, train_y);
  DataSet test_set(test_x, test_y);

  Net model(kSensors, 64, kFaults);
  model->to(opts.device);

  train(model, train_set, opts);

  const EvalMetrics m = evaluate(model, test_set, opts);
  std::printf("test loss %.4f acc %.3f\n", m.loss, m.accuracy);
  return 0;
}
