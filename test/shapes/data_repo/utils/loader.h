#ifndef LOADER_H
#define LOADER_H

#include <tuple>
#include <vector>
#include <random>
// For External Library
#include <torch/torch.h>
// For Original Header
#include "datasets.h"


// -----------------------
// namespace{DataLoader}
// -----------------------
namespace DataLoader{

    // -----------------------------------------------------------------
    // namespace{DataLoader} -> class{TableLoader}
    // Usage:
    //     DataLoader::TableLoader dataloader(dataset, batch_size, shuffle);
    //     std::tuple<torch::Tensor, torch::Tensor> mini_batch;
    //     while (dataloader(mini_batch)){ ... }   // one epoch
    // The loader rewinds itself at the end of an epoch (operator() returns
    // false once) and reshuffles when the next epoch starts.
    // -----------------------------------------------------------------
    class TableLoader{
    private:
        datasets::SyntheticTable dataset;
        size_t batch_size;
        bool shuffle;
        bool drop_last;
        size_t size;
        std::vector<size_t> idx;
        size_t count;
        size_t count_max;
        std::mt19937 mt;
    public:
        TableLoader(){}
        TableLoader(datasets::SyntheticTable &dataset_, const size_t batch_size_=1, const bool shuffle_=false, const bool drop_last_=false);
        bool operator()(std::tuple<torch::Tensor, torch::Tensor> &data);
        void reset();
        size_t get_count_max();
    };

}


// Mini-batch of the second loader.
struct Batch{
    torch::Tensor inputs;   // {B,D}
    torch::Tensor targets;  // {B,...}
};


// ----------------------------------------------------------------------
// class{BatchStream}: a lighter loader over a dataset it does not own.
//     BatchStream stream(dataset, 64, /*shuffle=*/true);
//     Batch batch;
//     stream.reset();                  // at the start of every epoch
//     while (stream.next(batch)){ ... }
// ----------------------------------------------------------------------
class BatchStream{
public:
    BatchStream(const datasets::SyntheticTable &dataset, size_t batch_size, bool shuffle, unsigned seed = 2023);

    void reset();
    bool next(Batch &batch);

    size_t num_batches() const { return (indices_.size() + batch_size_ - 1) / batch_size_; }
    size_t dataset_size() const { return dataset_.size(); }

private:
    const datasets::SyntheticTable &dataset_;
    size_t batch_size_;
    bool shuffle_;
    std::vector<size_t> indices_;
    size_t cursor_;
    std::mt19937 rng_;
};



#endif
