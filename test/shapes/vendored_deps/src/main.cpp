// ridge_mlp: fits an MLP to a synthetic nonlinear regression problem.
//
//   ridge_mlp [--epochs N] [--batch-size B] [--lr LR] [--hidden 64,64]
//             [--config file.json] [--metrics metrics.json] [--checkpoint model.pt]
#include <torch/torch.h>

#include <boost/algorithm/string.hpp>
#include <boost/format.hpp>
#include <boost/lexical_cast.hpp>

#include <flagparse/flagparse.hpp>
#include <minijson/minijson.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "model.h"
#include "synth.h"

namespace {

// Used when no --config is given.
const char* kDefaultConfig = R"({
  // data set sizes must stay multiples of the batch size
  "data": {"train_size": 2048, "test_size": 512, "features": 10, "noise": 0.3},
  "optimizer": {"name": "adam", "weight_decay": 0.0001}
})";

class RegressionSet : public torch::data::datasets::Dataset<RegressionSet> {
 public:
  RegressionSet(torch::Tensor x, torch::Tensor y) : x_(std::move(x)), y_(std::move(y)) {}
  torch::data::Example<> get(size_t index) override { return {x_[index], y_[index]}; }
  torch::optional<size_t> size() const override { return static_cast<size_t>(x_.size(0)); }

 private:
  torch::Tensor x_, y_;
};

std::vector<int64_t> parse_widths(const std::string& text) {
  std::vector<std::string> parts;
  boost::algorithm::split(parts, text, boost::algorithm::is_any_of(",x"), boost::algorithm::token_compress_on);
  std::vector<int64_t> widths;
  for (auto& p : parts) {
    boost::algorithm::trim(p);
    if (!p.empty()) widths.push_back(boost::lexical_cast<int64_t>(p));
  }
  return widths;
}

std::vector<std::string> parse_widths_text(const std::vector<int64_t>& widths) {
  std::vector<std::string> out;
  for (int64_t w : widths) out.push_back(std::to_string(w));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  torch::manual_seed(7);

  flagparse::Parser parser("ridge_mlp", "Fits an MLP to a synthetic nonlinear regression problem and writes "
                                        "the final metrics as JSON.");
  parser.add("epochs", "training epochs").short_name('e').default_value("8");
  parser.add("batch-size", "training batch size").short_name('b').default_value("32");
  parser.add("lr", "Adam learning rate").default_value("0.005");
  parser.add("hidden", "hidden layer widths, comma separated").default_value("64,64").metavar("W1,W2,..");
  parser.add("config", "JSON file with data and optimizer settings").metavar("FILE");
  parser.add("metrics", "where to write the metrics (JSON)").default_value("metrics.json").metavar("FILE");
  parser.add("checkpoint", "where to save the trained model").default_value("model.pt").metavar("FILE");
  parser.add_flag("quiet", "only print the final test loss").short_name('q');
  parser.epilog("Example: ridge_mlp -e 12 --hidden 128,64 --config data.json");
  const flagparse::Result args = parser.parse(argc, argv);

  const bool quiet = args.get_or<bool>("quiet", false);
  if (!quiet) {
    std::cout << "ridge_mlp options:\n";
    args.dump();
  }

  minijson::value config =
      args.has("config") ? minijson::parse_file(args.get<std::string>("config")) : minijson::parse(kDefaultConfig);
  const minijson::value& data_cfg = config["data"];
  SynthSpec train_spec;
  train_spec.size = data_cfg["train_size"].as_int();
  train_spec.features = data_cfg["features"].as_int();
  train_spec.noise = data_cfg.number_or("noise", 0.3);
  SynthSpec test_spec = train_spec;
  test_spec.size = data_cfg["test_size"].as_int();

  const int epochs = args.get<int>("epochs");
  const int batch_size = args.get<int>("batch-size");
  const double lr = args.get<double>("lr");
  const std::vector<int64_t> hidden = parse_widths(args.get<std::string>("hidden"));

  torch::Device device = torch::kCPU;
  if (torch::cuda::is_available()) device = torch::Device(torch::kCUDA, 0);

  auto train_xy = make_regression(train_spec);
  auto test_xy = make_regression(test_spec);
  const double test_size = static_cast<double>(test_spec.size);

  auto train_loader = torch::data::make_data_loader<torch::data::samplers::RandomSampler>(
      RegressionSet(train_xy.first, train_xy.second).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(batch_size));
  auto test_loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      RegressionSet(test_xy.first, test_xy.second).map(torch::data::transforms::Stack<>()),
      torch::data::DataLoaderOptions().batch_size(128));

  RidgeMLP model(train_spec.features, hidden);
  model->to(device);
  torch::optim::Adam optimizer(
      model->parameters(),
      torch::optim::AdamOptions(lr).weight_decay(config["optimizer"].number_or("weight_decay", 0.0)));

  minijson::value history = minijson::array{};
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model->train();
    double sum = 0.0;
    int64_t batches = 0;
    for (auto& batch : *train_loader) {
      auto x = batch.data.to(device);
      auto y = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::mse_loss(model->forward(x), y);
      loss.backward();
      optimizer.step();
      sum += loss.item<double>();
      ++batches;
    }
    const double epoch_loss = sum / batches;
    history.push_back(epoch_loss);
    if (!quiet) std::cout << boost::format("epoch %d loss %.4f") % epoch % epoch_loss << std::endl;
  }
  torch::save(model, args.get<std::string>("checkpoint"));

  model->eval();
  torch::NoGradGuard no_grad;
  double test_sum = 0.0;
  for (const auto& batch : *test_loader) {
    auto x = batch.data.to(device);
    auto y = batch.target.to(device);
    test_sum += torch::mse_loss(model->forward(x), y, torch::Reduction::Sum).item<double>();
  }
  const double test_loss = test_sum / test_size;
  std::cout << boost::format("test loss %.4f") % test_loss << std::endl;

  minijson::value metrics;
  metrics["train_loss"] = history;
  metrics["test_loss"] = test_loss;
  metrics["epochs"] = epochs;
  metrics["hidden"] = boost::algorithm::join(parse_widths_text(hidden), ",");
  metrics["config"] = config;
  if (!minijson::save_file(metrics, args.get<std::string>("metrics"))) {
    std::cerr << "warning: could not write " << args.get<std::string>("metrics") << std::endl;
  }
  return 0;
}
