#include <iostream>
#include <cstdio>
#include <tuple>
// For External Library
#include <torch/torch.h>
// For Original Header
#include "options.hpp"
#include "networks.hpp"
#include "datasets.h"
#include "loader.h"

// Function Prototype
void valid(DataLoader::TableLoader &valid_dataloader, const size_t dataset_size, torch::Device &device, MLPClassifier &model, const std::string &name);


// -------------------
// Training Function
// -------------------
void train(const Options &opt, torch::Device &device, MLPClassifier &model, datasets::SyntheticTable &train_set, datasets::SyntheticTable &valid_set){

    constexpr size_t valid_every = 1;

    // (0) Initialization and Declaration
    size_t epoch;
    size_t total_iter, iter;
    double total_loss;
    int64_t total_correct, total_seen;
    torch::Tensor feature, label, output, loss;
    std::tuple<torch::Tensor, torch::Tensor> mini_batch;

    // (1) Get Training Dataset
    DataLoader::TableLoader dataloader(train_set, opt.batch_size, /*shuffle_=*/true, /*drop_last_=*/false);
    total_iter = dataloader.get_count_max();
    std::cout << "total training samples : " << train_set.size() << " (" << total_iter << " iterations per epoch)" << std::endl;

    // (2) Get Validation Dataset
    DataLoader::TableLoader valid_dataloader(valid_set, opt.valid_batch_size, /*shuffle_=*/false, /*drop_last_=*/false);

    // (3) Set Optimizer Method
    auto optimizer = torch::optim::Adam(model->parameters(), torch::optim::AdamOptions(opt.lr).betas({0.9, 0.999}));

    // (4) Set Loss Function
    auto criterion = torch::nn::CrossEntropyLoss();

    // (5) Training
    for (epoch = 1; epoch <= opt.epochs; epoch++){

        model->train();
        total_loss = 0.0;
        total_correct = 0;
        total_seen = 0;
        iter = 0;

        // -----------------------------------
        // a1. Mini Batch Learning
        // -----------------------------------
        while (dataloader(mini_batch)){

            feature = std::get<0>(mini_batch).to(device);
            label = std::get<1>(mini_batch).to(device);

            // -----------------------------------
            // b1. Training Phase
            // -----------------------------------
            output = model->forward(feature);
            loss = criterion(output, label);
            optimizer.zero_grad();
            loss.backward();
            optimizer.step();

            // -----------------------------------
            // b2. Record Loss (iteration)
            // -----------------------------------
            total_loss += loss.item<double>();
            total_correct += output.argmax(/*dim=*/1).eq(label).sum().item<int64_t>();
            total_seen += label.size(0);
            iter++;

        }

        // -----------------------------------
        // a2. Record Loss (epoch)
        // -----------------------------------
        std::printf("epoch %zu loss %.4f acc %.4f\n", epoch, total_loss / iter, (double)total_correct / (double)total_seen);

        // -----------------------------------
        // a3. Validation Mode
        // -----------------------------------
        if (epoch % valid_every == 0){
            valid(valid_dataloader, valid_set.size(), device, model, "val");
        }

    }

    // End Processing
    return;

}
