#include <torch/torch.h>

#include <iostream>
#include <memory>

#include "config.h"
#include "trainer.h"

int main() {
  torch::manual_seed(0);

  Config config;
  auto trainer = std::make_unique<Trainer>(config);
  trainer->fit(config.epochs);

  const EvalResult result = trainer->evaluate();
  std::cout << "test loss " << result.loss << " acc " << result.accuracy << std::endl;
  return 0;
}
