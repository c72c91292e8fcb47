// A program fabricize already migrated: it lints clean.
#include <torch/torch.h>
#include <fabric/fabric.h>
int main() {
  fabric::Fabric fabric(fabric::Options().accelerator("auto").devices("auto")
                            .strategy("ddp").precision("32-true"));
  fabric.launch();
  torch::Tensor x = torch::randn({2});
  auto y = x.to(fabric.device());
  auto loss = y.sum();
  fabric.backward(loss);
}
