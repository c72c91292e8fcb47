#include <iostream>
#include <cstdio>
#include <string>
#include <tuple>
// For External Library
#include <torch/torch.h>
// For Original Header
#include "networks.hpp"
#include "datasets.h"
#include "loader.h"


// -------------------
// Validation Function
// -------------------
void valid(DataLoader::TableLoader &valid_dataloader, const size_t dataset_size, torch::Device &device, MLPClassifier &model, const std::string &name){

    // (0) Initialization and Declaration
    double total_loss;
    int64_t total_correct;
    torch::Tensor feature, label, output, loss;
    std::tuple<torch::Tensor, torch::Tensor> mini_batch;

    // (1) Set Loss Function
    auto criterion = torch::nn::CrossEntropyLoss();

    // (2) Validation
    torch::NoGradGuard no_grad;
    model->eval();
    total_loss = 0.0;
    total_correct = 0;
    while (valid_dataloader(mini_batch)){
        feature = std::get<0>(mini_batch).to(device);
        label = std::get<1>(mini_batch).to(device);
        output = model->forward(feature);
        loss = criterion(output, label);
        total_loss += loss.item<double>() * (double)label.size(0);
        total_correct += output.argmax(/*dim=*/1).eq(label).sum().item<int64_t>();
    }

    // (3) Record Loss
    std::printf("%s loss %.4f acc %.4f\n", name.c_str(), total_loss / (double)dataset_size, (double)total_correct / (double)dataset_size);

    // End Processing
    return;

}
