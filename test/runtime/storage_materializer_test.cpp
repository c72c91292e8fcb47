// StorageMaterializer (runtime/src/strategies/storage_materializer.h): parameters whose
// memory is released are brought back by the first operator that reads
// them, in a forward and in a backward, on modules held every way users
// hold them (a holder member, a Sequential, a by-value model, a parameter of
// the model itself read through a plain function), and the results are the
// ones the untouched model computes, bit for bit.
#include "strategies/storage_materializer.h"

#include <torch/torch.h>

#include <gtest/gtest.h>

namespace {

struct BlockImpl : torch::nn::Module {
  BlockImpl() { fc = register_module("fc", torch::nn::Linear(8, 8)); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::tanh(fc->forward(x)); }
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(Block);

// Held by value by the test, the way `Net model;` is written.
struct Net : torch::nn::Module {
  Net() {
    stem = register_module("stem", torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::ReLU()));
    block = register_module("block", Block());
    head = register_parameter("head", torch::randn({8, 3}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return torch::matmul(block(stem->forward(x)), head); }
  torch::nn::Sequential stem{nullptr};
  Block block{nullptr};
  torch::Tensor head;
};

// Each unit's parameters, as the fsdp strategy groups them.
std::vector<std::vector<torch::Tensor>> unitsOf(Net& net) {
  return {net.stem->parameters(), net.block->parameters(), {net.head}};
}

struct Trained {
  torch::Tensor out;
  std::vector<torch::Tensor> grads;
};

Trained trainStep(Net& net, const torch::Tensor& x, const std::function<void()>& beforeBackward = nullptr) {
  Trained result;
  result.out = net.forward(x);
  torch::Tensor loss = result.out.pow(2).sum();
  if (beforeBackward) beforeBackward();
  loss.backward();
  for (const auto& p : net.parameters()) result.grads.push_back(p.grad().clone());
  for (auto& p : net.parameters()) p.mutable_grad() = torch::Tensor();
  return result;
}

TEST(StorageMaterializer, ForwardAndBackwardBringReleasedParametersBack) {
  torch::manual_seed(3);
  Net net;
  const torch::Tensor x = torch::randn({5, 4});
  const Trained reference = trainStep(net, x);

  // What the fill writes back: the values as they were (an all-gather of
  // the shards under fsdp).
  std::vector<std::vector<torch::Tensor>> units = unitsOf(net), saved;
  for (const auto& unit : units) {
    saved.emplace_back();
    for (const auto& p : unit) saved.back().push_back(p.detach().clone());
  }
  std::vector<int> fills(units.size(), 0);
  fabric::detail::StorageMaterializer materializer([&](size_t group) {
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < units[group].size(); ++i) units[group][i].copy_(saved[group][i]);
    ++fills[group];
  });
  for (const auto& unit : units) materializer.add_group(unit);
  auto releaseAll = [&] {
    for (size_t g = 0; g < units.size(); ++g) materializer.release(g);
  };

  releaseAll();
  for (const auto& unit : units)
    for (const auto& p : unit) {
      EXPECT_EQ(p.storage().nbytes(), 0u) << "released, the parameter holds no memory";
      EXPECT_GT(p.numel(), 0) << "released, it keeps its sizes";
    }
  // Released again between forward and backward: the backward's operators
  // read the weights autograd saved (views such as weight.t()).
  const Trained sharded = trainStep(net, x, releaseAll);

  EXPECT_TRUE(torch::equal(sharded.out, reference.out));
  ASSERT_EQ(sharded.grads.size(), reference.grads.size());
  for (size_t i = 0; i < reference.grads.size(); ++i)
    EXPECT_TRUE(torch::equal(sharded.grads[i], reference.grads[i])) << "gradient " << i;
  // Every unit came back for the forward; in the backward, the units whose
  // weights a gradient flows through (all but the first Linear's, whose
  // input needs no gradient) came back again.
  for (size_t g = 0; g < units.size(); ++g) EXPECT_GE(fills[g], 1) << "unit " << g;
  EXPECT_EQ(fills[1], 2) << "the block's weight is read again by the backward";
  EXPECT_EQ(fills[2], 2) << "the head is read again by the backward";
  EXPECT_EQ(materializer.materialized_on_demand(), static_cast<uint64_t>(fills[0] + fills[1] + fills[2]));
}

TEST(StorageMaterializer, ResidentGroupsCostNoFill) {
  torch::manual_seed(4);
  Net net;
  std::vector<std::vector<torch::Tensor>> units = unitsOf(net);
  int fills = 0;
  fabric::detail::StorageMaterializer materializer([&](size_t) { ++fills; });
  for (const auto& unit : units) materializer.add_group(unit);
  trainStep(net, torch::randn({2, 4}));
  EXPECT_EQ(fills, 0);
  EXPECT_EQ(materializer.materialized_on_demand(), 0u);
  // Released and brought back by hand (code that reads memory without an
  // operator first calls materialize_all()).
  materializer.release(0);
  EXPECT_FALSE(materializer.resident(0));
  materializer.materialize_all();
  EXPECT_TRUE(materializer.resident(0));
  EXPECT_EQ(fills, 1);
  EXPECT_EQ(materializer.materialized_on_demand(), 0u);
}

TEST(StorageMaterializer, DestructionLeavesTheModelWhole) {
  torch::manual_seed(5);
  Net net;
  std::vector<torch::Tensor> params = net.parameters();
  std::vector<torch::Tensor> saved;
  for (const auto& p : params) saved.push_back(p.detach().clone());
  {
    fabric::detail::StorageMaterializer materializer([&](size_t) {
      torch::NoGradGuard no_grad;
      for (size_t i = 0; i < params.size(); ++i) params[i].copy_(saved[i]);
    });
    materializer.add_group(params);
    materializer.release(0);
  }
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], saved[i]));
  // No callback left behind: an operator on a tensor of a finished
  // materializer's storage runs as usual.
  EXPECT_TRUE(torch::equal(params[0] * 1, saved[0]));
}

}  // namespace
