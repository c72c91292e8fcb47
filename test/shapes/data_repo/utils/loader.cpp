#include <tuple>
#include <vector>
#include <algorithm>
#include <numeric>
#include <random>
#include <cstdlib>
#include <cmath>
// For External Library
#include <torch/torch.h>
// For Original Header
#include "datasets.h"
#include "loader.h"


// ---------------------------------------------------------
// namespace{DataLoader} -> class{TableLoader} -> constructor
// ---------------------------------------------------------
DataLoader::TableLoader::TableLoader(datasets::SyntheticTable &dataset_, const size_t batch_size_, const bool shuffle_, const bool drop_last_){

    this->dataset = dataset_;
    this->batch_size = batch_size_;
    this->shuffle = shuffle_;
    this->drop_last = drop_last_;

    this->size = this->dataset.size();
    this->idx = std::vector<size_t>(this->size);
    for (size_t i = 0; i < this->size; i++){
        this->idx.at(i) = i;
    }

    this->count = 0;
    if (this->drop_last){
        this->count_max = (size_t)std::floor((double)this->size / (double)this->batch_size);
    }
    else{
        this->count_max = (size_t)std::ceil((double)this->size / (double)this->batch_size);
    }

    this->mt.seed(std::rand());

}


// -------------------------------------------------------
// namespace{DataLoader} -> class{TableLoader} -> operator
// -------------------------------------------------------
bool DataLoader::TableLoader::operator()(std::tuple<torch::Tensor, torch::Tensor> &data){

    // (0) Initialization and Declaration
    size_t i;
    size_t idx_start = this->batch_size * this->count;
    size_t idx_end = std::min(this->size, (idx_start + this->batch_size));
    size_t mini_batch_size = idx_end - idx_start;
    torch::Tensor data1, data2;
    std::vector<torch::Tensor> features, targets;
    std::tuple<torch::Tensor, torch::Tensor> sample;

    // (1) Special Handling on Certain Count
    if ((this->count == 0) && this->shuffle){
        std::shuffle(this->idx.begin(), this->idx.end(), this->mt);
    }
    else if (this->count == this->count_max){
        this->count = 0;
        return false;
    }

    // (2) Get Mini Batch Data
    for (i = 0; i < mini_batch_size; i++){
        this->dataset.get(this->idx.at(idx_start + i), sample);
        features.push_back(std::get<0>(sample));
        targets.push_back(std::get<1>(sample));
    }

    // (3) Organize Data
    data1 = torch::stack(features, /*dim=*/0);  // {N,D}
    data2 = torch::stack(targets, /*dim=*/0);   // {N} or {N,1}

    // Post Processing
    this->count++;
    data = {data1, data2};

    // End Processing
    return true;

}


// -----------------------------------------------------------------
// namespace{DataLoader} -> class{TableLoader} -> function{reset}
// -----------------------------------------------------------------
void DataLoader::TableLoader::reset(){
    this->count = 0;
    return;
}


// ------------------------------------------------------------------------
// namespace{DataLoader} -> class{TableLoader} -> function{get_count_max}
// ------------------------------------------------------------------------
size_t DataLoader::TableLoader::get_count_max(){
    return this->count_max;
}


// ===================================================================
// BatchStream
// ===================================================================

BatchStream::BatchStream(const datasets::SyntheticTable &dataset, size_t batch_size, bool shuffle, unsigned seed)
    : dataset_(dataset), batch_size_(batch_size), shuffle_(shuffle), indices_(dataset.size()), cursor_(0), rng_(seed) {
    std::iota(indices_.begin(), indices_.end(), size_t{0});
}

void BatchStream::reset() {
    cursor_ = 0;
    if (shuffle_) {
        std::shuffle(indices_.begin(), indices_.end(), rng_);
    }
}

bool BatchStream::next(Batch &batch) {
    if (cursor_ >= indices_.size()) {
        return false;
    }
    const size_t end = std::min(cursor_ + batch_size_, indices_.size());
    std::vector<torch::Tensor> xs, ys;
    std::tuple<torch::Tensor, torch::Tensor> sample;
    for (size_t k = 0; cursor_ + k < end; ++k) {
        dataset_.get(indices_[cursor_ + k], sample);
        xs.push_back(std::get<0>(sample));
        ys.push_back(std::get<1>(sample));
    }
    batch.inputs = torch::stack(xs);
    batch.targets = torch::stack(ys);
    cursor_ = end;
    return true;
}
