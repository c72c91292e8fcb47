// Arguments labelled with comments (`/*loss_value=*/x`): the Fabric goes
// before the label, which stays with its argument.
#include <torch/torch.h>

struct Progress {
  void increment(/*values=*/std::vector<float> values);
};
void Progress::increment(std::vector<float> values) { std::cout << values.size() << "\n"; }

void report(/*epoch=*/int epoch, double loss) { std::cout << "epoch " << epoch << " loss " << loss << "\n"; }

// A class that holds its optimizer, constructed in a macro's argument: the
// argument's tokens are the file's, so the Fabric is passed there too.
#define CHECKED(...) __VA_ARGS__
class Trainer {
 public:
  explicit Trainer(torch::nn::Linear model) : model_(model), optimizer_(model_->parameters(), 0.1) {}

 private:
  torch::nn::Linear model_;
  torch::optim::SGD optimizer_;
};

int main() {
  torch::nn::Linear model(2, 1);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  for (int epoch = 0; epoch < 2; ++epoch) {
    auto loss = torch::mse_loss(model->forward(torch::ones({4, 2})), torch::zeros({4, 1}));
    loss.backward();
    optimizer.step();
    report(/*epoch=*/epoch, /*loss=*/loss.item<double>());
  }
  CHECKED(Trainer trainer(model));
  return 0;
}
