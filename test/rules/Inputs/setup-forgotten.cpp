#include <torch/torch.h>
#include <fabric/fabric.h>

int main() {
  fabric::Fabric fabric(fabric::Options().accelerator("auto").devices("auto")
                            .strategy("ddp").precision("32-true"));
  fabric.launch();
  torch::nn::Linear model(4, 2);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  fabric.setup(model, optimizer);
  // Added later, and never set up.
  torch::optim::Adam second(model->parameters());
  return 0;
}
