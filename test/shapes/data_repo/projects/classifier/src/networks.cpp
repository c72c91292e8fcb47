// For External Library
#include <torch/torch.h>
// For Original Header
#include "networks.hpp"


// ----------------------------------------------------------------------
// struct{MLPClassifierImpl}(nn::Module) -> constructor
// ----------------------------------------------------------------------
MLPClassifierImpl::MLPClassifierImpl(const int64_t in_dim, const int64_t hid_dim, const int64_t class_num, const double dropout){
    this->fc1 = register_module("fc1", nn::Linear(in_dim, hid_dim));
    this->fc2 = register_module("fc2", nn::Linear(hid_dim, hid_dim));
    this->fc3 = register_module("fc3", nn::Linear(hid_dim, class_num));
    this->drop = register_module("drop", nn::Dropout(dropout));
}


// ----------------------------------------------------------------------
// struct{MLPClassifierImpl}(nn::Module) -> function{forward}
// ----------------------------------------------------------------------
torch::Tensor MLPClassifierImpl::forward(torch::Tensor x){
    torch::Tensor out;
    out = torch::relu(this->fc1->forward(x));    // {N,D} ===> {N,H}
    out = this->drop->forward(out);
    out = torch::relu(this->fc2->forward(out));  // {N,H} ===> {N,H}
    out = this->fc3->forward(out);               // {N,H} ===> {N,C}
    return out;
}
