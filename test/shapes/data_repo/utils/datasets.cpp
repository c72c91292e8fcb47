#include <tuple>
#include <cmath>
// For External Library
#include <torch/torch.h>
#include <ATen/CPUGeneratorImpl.h>
// For Original Header
#include "datasets.h"


// --------------------------------------------------------
// namespace{datasets} -> class{SyntheticTable} -> constructor
// --------------------------------------------------------
datasets::SyntheticTable::SyntheticTable(const size_t size_, const int64_t dim_, const Task task_, const uint64_t sample_seed_, const uint64_t problem_seed_, const int64_t classes_){

    this->task = task_;
    this->classes = classes_;
    const int64_t n = (int64_t)size_;

    // (1) Problem (shared by every table made with the same problem_seed)
    at::Generator problem_gen = at::detail::createCPUGenerator(problem_seed_);
    torch::Tensor teacher = torch::randn({dim_, this->classes}, problem_gen);
    torch::Tensor direction = torch::randn({dim_, 2}, problem_gen) / std::sqrt((double)dim_);

    // (2) Samples
    at::Generator gen = at::detail::createCPUGenerator(sample_seed_);
    this->features = torch::randn({n, dim_}, gen);
    if (this->task == Task::Classification){
        torch::Tensor clean = torch::tanh(this->features.matmul(teacher)).argmax(1);
        torch::Tensor flip = torch::rand({n}, gen) < 0.1;  // 10% wrong labels
        torch::Tensor random_labels = torch::randint(this->classes, {n}, gen, torch::kLong);
        this->targets = torch::where(flip, random_labels, clean);
    }
    else{
        torch::Tensor proj = this->features.matmul(direction);  // {N,2}
        torch::Tensor clean = torch::sin(1.5 * proj.select(1, 0)) + 0.5 * proj.select(1, 1);
        torch::Tensor noise = 0.3 * torch::randn({n}, gen);
        this->targets = (clean + noise).unsqueeze(1);
    }

}


// ------------------------------------------------------
// namespace{datasets} -> class{SyntheticTable} -> function{get}
// ------------------------------------------------------
void datasets::SyntheticTable::get(const size_t idx, std::tuple<torch::Tensor, torch::Tensor> &data) const{
    torch::Tensor feature = this->features[(int64_t)idx];
    torch::Tensor target = this->targets[(int64_t)idx];
    data = {feature, target};
    return;
}


// -------------------------------------------------------
// namespace{datasets} -> class{SyntheticTable} -> function{size}
// -------------------------------------------------------
size_t datasets::SyntheticTable::size() const{
    return (size_t)this->features.size(0);
}


// ------------------------------------------------------
// namespace{datasets} -> class{SyntheticTable} -> function{dim}
// ------------------------------------------------------
int64_t datasets::SyntheticTable::dim() const{
    return this->features.size(1);
}


// -------------------------------------------------------------
// namespace{datasets} -> class{SyntheticTable} -> function{num_classes}
// -------------------------------------------------------------
int64_t datasets::SyntheticTable::num_classes() const{
    return this->classes;
}
