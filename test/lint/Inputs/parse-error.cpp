// Does not compile: lint must say so and exit 2.
#include <torch/torch.h>
int main() { torch::Tensor x = undeclared_thing(); x.cuda(); }
