#include <iostream>
#include <cstdlib>
// For External Library
#include <torch/torch.h>
// For Original Header
#include "options.hpp"
#include "networks.hpp"
#include "datasets.h"
#include "loader.h"

// Function Prototype
void train(const Options &opt, torch::Device &device, MLPClassifier &model, datasets::SyntheticTable &train_set, datasets::SyntheticTable &valid_set);
void valid(DataLoader::TableLoader &valid_dataloader, const size_t dataset_size, torch::Device &device, MLPClassifier &model, const std::string &name);


// -----------------------------------
// 0. Main Function
// -----------------------------------
int main(){

    Options opt;

    // (1) Select Device
    torch::Device device = torch::cuda::is_available() ? torch::kCUDA : torch::kCPU;
    std::cout << "using device = " << device << std::endl;

    // (2) Fix Seed
    std::srand(opt.seed);
    torch::manual_seed(opt.seed);

    // (3) Set Datasets (one problem, three draws)
    datasets::SyntheticTable train_set(opt.train_size, opt.dim, datasets::Task::Classification, /*sample_seed=*/1, /*problem_seed=*/100, opt.class_num);
    datasets::SyntheticTable valid_set(opt.valid_size, opt.dim, datasets::Task::Classification, /*sample_seed=*/2, /*problem_seed=*/100, opt.class_num);
    datasets::SyntheticTable test_set(opt.test_size, opt.dim, datasets::Task::Classification, /*sample_seed=*/3, /*problem_seed=*/100, opt.class_num);

    // (4) Define Network
    MLPClassifier model(opt.dim, opt.hid_dim, opt.class_num, opt.dropout);
    model->to(device);

    // (5) Train and Test
    train(opt, device, model, train_set, valid_set);
    DataLoader::TableLoader test_dataloader(test_set, opt.valid_batch_size, /*shuffle_=*/false, /*drop_last_=*/false);
    valid(test_dataloader, test_set.size(), device, model, "test");

    // End Processing
    return 0;

}
