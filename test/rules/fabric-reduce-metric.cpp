// RUN: %migrate %s -- %flags > %t.cpp
// RUN: FileCheck %s --input-file=%t.cpp
// RUN: %migrate %t.cpp -- %flags | diff -u %t.cpp -
#include <torch/torch.h>

struct NetImpl : torch::nn::Module {
  torch::Tensor forward(torch::Tensor x);
};
TORCH_MODULE(Net);

struct Points : torch::data::datasets::Dataset<Points> {
  torch::data::Example<> get(size_t index) override;
  c10::optional<size_t> size() const override;
};

// The classic evaluation: sums per batch, divided by the data set's size
// after the loop. Each rank sums its shard: the sums are all-reduced first.
// CHECK-LABEL: {{^}}template <class Loader>
// CHECK-NEXT: {{^}}double evaluate(fabric::Fabric& fabric, Net& model, Loader& loader, size_t dataset_size) {
// CHECK: {{^    }}correct += output.argmax(1).eq(batch.target).sum().template item<int64_t>();
// CHECK-NEXT: {{^  }}}
// CHECK-NEXT: {{^  }}test_loss = fabric.all_reduce(test_loss, fabric::ReduceOp::Sum);
// CHECK-NEXT: {{^  }}correct = fabric.all_reduce(correct, fabric::ReduceOp::Sum);
// CHECK-NEXT: {{^  }}fabric.printf("test loss %.4f acc %.4f\n", test_loss / dataset_size,
template <class Loader>
double evaluate(Net& model, Loader& loader, size_t dataset_size) {
  double test_loss = 0;
  int64_t correct = 0;
  for (const auto& batch : loader) {
    auto output = model->forward(batch.data);
    test_loss += torch::nll_loss(output, batch.target).template item<double>() * batch.data.size(0);
    correct += output.argmax(1).eq(batch.target).sum().template item<int64_t>();
  }
  std::printf("test loss %.4f acc %.4f\n", test_loss / dataset_size,
              static_cast<double>(correct) / dataset_size);
  return test_loss / dataset_size;
}

// Two loops over split data add to one total: reduced once, after the
// second (reduced after each, the first part would count N times).
// CHECK-LABEL: {{^}}double evaluate_two(
// CHECK: {{^}}    count += 10;{{$}}
// CHECK-NEXT: {{^}}  }{{$}}
// CHECK-NEXT: {{^}}  for (int64_t i : fabric.shard_range<int64_t>(0, B.size(0), 10)) {{{$}}
// CHECK: {{^}}    count += 10;{{$}}
// CHECK-NEXT: {{^}}  }{{$}}
// CHECK-NEXT: {{^}}  total = fabric.all_reduce(total, fabric::ReduceOp::Sum);{{$}}
// CHECK-NEXT: {{^}}  count = fabric.all_reduce(count, fabric::ReduceOp::Sum);{{$}}
// CHECK-NEXT: {{^}}  return total / count;{{$}}
double evaluate_two(Net& model, const torch::Tensor& A, const torch::Tensor& B) {
  torch::NoGradGuard no_grad;
  double total = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < A.size(0); i += 10) {
    total += model->forward(A.slice(0, i, i + 10)).sum().item<double>();
    count += 10;
  }
  for (int64_t i = 0; i < B.size(0); i += 10) {
    total += model->forward(B.slice(0, i, i + 10)).sum().item<double>();
    count += 10;
  }
  return total / count;
}

// A class's members summed afresh in each call (reset before the loop) and
// read in another member function (`fit()` dividing what `evaluate()`
// summed): all-reduced after the loop, as locals are. A count kept across
// calls (never reset) and a reset sum nothing reads are left alone.
// CHECK-LABEL: {{^}}class Evaluator {
// CHECK: {{^      }}++batches_;
// CHECK-NEXT: {{^    }}}
// CHECK-NEXT: {{^    }}loss_sum_ = fabric_.all_reduce(loss_sum_, fabric::ReduceOp::Sum);
// CHECK-NEXT: {{^    }}seen_ = fabric_.all_reduce(seen_, fabric::ReduceOp::Sum);
// CHECK-NEXT: {{^    }}correct_ = fabric_.all_reduce(correct_, fabric::ReduceOp::Sum);
// CHECK-NEXT: {{^    }}batches_ = fabric_.all_reduce(batches_, fabric::ReduceOp::Sum);
// CHECK-NEXT: {{^  }}}
// CHECK: {{^}}    for (auto& batch : first) both_ +=
// CHECK-NEXT: {{^}}    for (auto& batch : second) both_ +=
// CHECK-NEXT: {{^}}    both_ = fabric_.all_reduce(both_, fabric::ReduceOp::Sum);
// CHECK: {{^}}    for (auto& batch : loader) total_loss_ +=
// CHECK-NEXT: {{^}}    fabric_.backward(total_loss_);
class Evaluator {
 public:
  explicit Evaluator(Net model) : model_(model), optimizer_(model_->parameters(), torch::optim::SGDOptions(0.1)) {}
  template <class Loader>
  void evaluate(Loader& loader) {
    seen_ = 0;
    this->loss_sum_ = 0.0;
    correct_ = torch::zeros({1});
    unread_ = 0;
    batches_ = 0;
    for (auto& batch : loader) {
      auto output = model_->forward(batch.data);
      loss_sum_ += torch::mse_loss(output, batch.target).template item<double>() * batch.data.size(0);
      seen_ += batch.data.size(0);
      correct_ += output.argmax(1).eq(batch.target).sum();
      ++calls_;
      ++unread_;
      ++batches_;
    }
  }
  // Two loaders summed into one member: reduced once, after the second.
  template <class Loader>
  void evaluate_two(Loader& first, Loader& second) {
    both_ = 0;
    for (auto& batch : first) both_ += model_->forward(batch.data).sum().template item<double>();
    for (auto& batch : second) both_ += model_->forward(batch.data).sum().template item<double>();
  }
  double both() const { return both_; }
  // A loss summed over the batches and back-propagated once: no metric.
  template <class Loader>
  void full_batch_step(Loader& loader) {
    total_loss_ = torch::zeros({1});
    for (auto& batch : loader) total_loss_ += model_->forward(batch.data).sum();
    total_loss_.backward();
    optimizer_.step();
  }
  // Read in a member template only.
  template <class Out>
  void report(Out& out) const {
    out << batches_;
  }
  double mean_loss() const { return loss_sum_ / seen_; }
  double accuracy() const { return correct_.item<double>() / seen_; }
  int64_t calls() const { return calls_; }

 private:
  Net model_;
  torch::optim::SGD optimizer_;
  int64_t seen_ = 0;
  double loss_sum_ = 0;
  torch::Tensor correct_;
  int64_t calls_ = 0;
  int64_t unread_ = 0;
  int64_t batches_ = 0;
  double both_ = 0;
  torch::Tensor total_loss_;
};

// Per epoch: a running total, a batch count, a tensor sum; all reduced. A
// count kept across epochs (a global step) is every rank's own and is left
// alone, as is a value assigned rather than summed.
// CHECK-LABEL: {{^}}int main() {
// CHECK-NOT: global_step = fabric.all_reduce
// CHECK-NOT: last = fabric.all_reduce
int main() {
  Net model;
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  auto loader = torch::data::make_data_loader(Points().map(torch::data::transforms::Stack<>()), 64);
  int64_t global_step = 0;
  int batches_seen = 0;
  for (int epoch = 0; epoch < 3; ++epoch) {
    double total = 0;
    int batches = 0;
    torch::Tensor sum_of_losses = torch::zeros({1});
    double last = 0;
    for (auto& batch : *loader) {
      auto loss = torch::mse_loss(model->forward(batch.data), batch.target);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++batches;
      ++global_step;
      sum_of_losses += loss;
      // Assigned, not summed: this rank's last loss, printed as it is.
      last = loss.item<double>();
    }
    ++batches_seen;
    std::cout << "epoch " << epoch << " loss " << total / batches << " last " << last
              << " sum " << sum_of_losses.item<double>() << " step " << global_step << std::endl;
  }
  evaluate(model, *loader, 640);
  Evaluator evaluator(model);
  evaluator.evaluate(*loader);
  std::cout << evaluator.mean_loss() << " " << evaluator.accuracy() << " " << evaluator.calls() << std::endl;
  evaluator.report(std::cout);
  evaluator.evaluate_two(*loader, *loader);
  evaluator.full_batch_step(*loader);
  std::cout << evaluator.both() << std::endl;
  std::printf("two %f\n", evaluate_two(model, torch::randn({40, 4}), torch::randn({30, 4})));
  return 0;
}
// CHECK: {{^}}      last = loss.item<double>();
// CHECK-NEXT: {{^    }}}
// CHECK-NEXT: {{^    }}total = fabric.all_reduce(total, fabric::ReduceOp::Sum);
// CHECK-NEXT: {{^    }}batches = fabric.all_reduce(batches, fabric::ReduceOp::Sum);
// CHECK-NEXT: {{^    }}sum_of_losses = fabric.all_reduce(sum_of_losses, fabric::ReduceOp::Sum);
// CHECK-NEXT: {{^    }}++batches_seen;
