// A hard-coded device index is reported, never edited.
#include <torch/torch.h>
int main() {
  torch::Device second("cuda:1");
  (void)second;
}
