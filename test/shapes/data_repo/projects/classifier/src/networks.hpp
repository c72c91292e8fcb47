#ifndef NETWORKS_HPP
#define NETWORKS_HPP

// For External Library
#include <torch/torch.h>

namespace nn = torch::nn;


// -------------------------------------------------
// struct{MLPClassifierImpl}(nn::Module)
// -------------------------------------------------
struct MLPClassifierImpl : nn::Module{
private:
    nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
    nn::Dropout drop{nullptr};
public:
    MLPClassifierImpl(){}
    MLPClassifierImpl(const int64_t in_dim, const int64_t hid_dim, const int64_t class_num, const double dropout);
    torch::Tensor forward(torch::Tensor x);
};

TORCH_MODULE(MLPClassifier);


#endif
