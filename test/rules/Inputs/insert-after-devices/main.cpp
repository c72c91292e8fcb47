#include <torch/torch.h>

#include <string>

// Argument parsing that touches a device: the Fabric must exist before it.
int main(int argc, char** argv) {
  torch::Device device(argc > 1 ? torch::kCUDA : torch::kCPU);
  std::string name = argv[0];
  auto x = torch::ones({2}, device);
  return name.empty();
}
