// Loader classes of the project's own (Inputs/loader-class), sharded once
// where they are defined: the header gets the full order's member, the
// source the share after each place that makes the epoch's order, and the
// epoch is measured by the share. A loop in main.cpp over one of them learns
// that it is sharded (its sums are all-reduced); one the tool cannot shard
// is reported where its order is declared.
// RUN: rm -rf %t && mkdir -p %t && cp -r %S/Inputs/loader-class %t/project
// RUN: %fabricize %t/project/loader.cpp %t/project/main.cpp -o %t/out --report %t/report.json -- %flags -I%t/project 2> %t/err; test $? -eq 1
// RUN: FileCheck %s --check-prefix=HEADER --input-file=%t/out/loader.h
// RUN: FileCheck %s --check-prefix=SOURCE --input-file=%t/out/loader.cpp
// RUN: FileCheck %s --check-prefix=MAIN --input-file=%t/out/main.cpp
// RUN: FileCheck %s --check-prefix=MSG --input-file=%t/err --implicit-check-not='warning:'
// RUN: FileCheck %s --check-prefix=REPORT --input-file=%t/report.json
// Migrating the migration changes nothing.
// RUN: %fabricize %t/out/loader.cpp %t/out/main.cpp -o %t/again -- %flags -I%t/out 2> /dev/null; test $? -eq 1
// RUN: diff -r %t/out %t/again
//
// HEADER: {{^}}#include <fabric/fabric.h>{{$}}
// HEADER: {{^}}  std::vector<size_t> indices_;{{$}}
// HEADER-NEXT: {{^}}  std::vector<size_t> all_indices_;  // every rank's order; indices_ holds this rank's share{{$}}
// HEADER: {{^}}  std::vector<size_t> idx;{{$}}
// HEADER-NEXT: {{^}}  std::vector<size_t> all_idx;  // every rank's order; idx holds this rank's share{{$}}
// HEADER: {{^}}  std::vector<size_t> order_;{{$}}
// HEADER-NEXT: {{^}}  std::vector<size_t> all_order_;
// A data set drawing its samples once keeps its seed.
// HEADER: {{^}}  explicit NoisyTable(unsigned seed) : gen_(seed) {}{{$}}
// The loader the tool cannot shard keeps its one member.
// HEADER: {{^}}class StepLoader {{{$}}
// HEADER-NOT: all_
//
// SOURCE-LABEL: IndexLoader::IndexLoader(
// SOURCE-NEXT: {{^}}    : ds_(ds), batch_size_(batch_size), shuffle_(shuffle), all_indices_(ds.size()), cursor_(0), rng_(seed) {{{$}}
// SOURCE-NEXT: {{^}}  std::iota(all_indices_.begin(), all_indices_.end(), 0);{{$}}
// SOURCE-NEXT: {{^}}  reset();{{$}}
// SOURCE-LABEL: void IndexLoader::reset() {
// SOURCE: {{^}}    std::shuffle(all_indices_.begin(), all_indices_.end(), rng_);{{$}}
// SOURCE-NEXT: {{^}}  }{{$}}
// SOURCE-NEXT: {{^}}  indices_ = fabric::shard(all_indices_);{{$}}
// SOURCE-LABEL: bool IndexLoader::operator()(Batch& batch) {
// SOURCE-NEXT: {{^}}  if (cursor_ >= indices_.size()) return false;{{$}}
// The `this->` style: its epoch length is made once in the constructor, so
// its shares are always padded.
// SOURCE-LABEL: DataLoader::ImageFolder::ImageFolder(
// SOURCE: {{^}}    this->all_idx.at(i) = i;{{$}}
// SOURCE-NEXT: {{^}}  }{{$}}
// SOURCE-NEXT: {{^}}  this->idx = fabric::shard(this->all_idx, /*pad=*/true);{{$}}
// SOURCE: {{^}}    this->count_max = std::floor((float)this->idx.size() / (float)this->batch_size);{{$}}
// SOURCE: {{^}}    this->count_max = std::ceil((float)this->idx.size() / (float)this->batch_size);{{$}}
// SOURCE: {{^}}  size_t idx_end = std::min(this->idx.size(), (idx_start + this->batch_size));{{$}}
// SOURCE: {{^}}    std::shuffle(this->all_idx.begin(), this->all_idx.end(), this->mt);{{$}}
// SOURCE-NEXT: {{^}}    this->idx = fabric::shard(this->all_idx, /*pad=*/true);{{$}}
// SOURCE-LABEL: RingLoader::RingLoader(
// SOURCE: {{^}}  order_ = fabric::shard(all_order_);{{$}}
// SOURCE: {{^}}void RingLoader::reset() { std::shuffle(all_order_.begin(), all_order_.end(), rng_); order_ = fabric::shard(all_order_); }{{$}}
// SOURCE: {{^}}    const size_t id = order_[(cursor_ + k) % order_.size()];{{$}}
// SOURCE-LABEL: StepLoader::StepLoader(
// SOURCE-NOT: fabric
// SOURCE: {{^}}RandomLoader::RandomLoader(const Samples& ds, size_t bs, unsigned seed) : ds_(ds), bs_(bs), gen_(seed + fabric::global_rank()) {}{{$}}
// SOURCE-LABEL: void NoisyTable::generate(
// SOURCE-NOT: fabric
//
// The evaluation over IndexLoader (defined in loader.cpp) sums its share.
// MAIN-LABEL: double evaluate(fabric::Fabric& fabric, Net& model, IndexLoader& loader) {
// MAIN: {{^}}  total = fabric.all_reduce(total, fabric::ReduceOp::Sum);{{$}}
// MAIN-NEXT: {{^}}  return total / static_cast<double>(loader.dataset_size());{{$}}
//
// MSG: warning: a data loader of the project's own, `StepLoader`, hands out batches by position in `order_`, but it measures its epoch with `steps_per_epoch_ * bs_`{{.*}}[fabric-own-dataloader]
// A loop that counts its own passes over `IndexLoader`, which loader.cpp
// shards as a loader that runs out: reported (over `RingLoader`, which wraps,
// it is not).
// MSG: main.cpp:58:5: warning: this training loop runs more passes than its rank's share of the data holds: it counts its own passes (`s < train_set.size() / 32`) and takes a batch from `IndexLoader`{{.*}}[fabric-own-dataloader]
//
// REPORT: "data_loops": [
// REPORT: "status": "sharded",
// REPORT-NEXT: "text": "its batches come from `IndexLoader`, sharded where the class is defined"
// REPORT: "status": "sharded",
// REPORT-NEXT: "text": "its batches come from `DataLoader::ImageFolder`
// REPORT: "status": "sharded",
// REPORT-NEXT: "text": "its batches come from `RingLoader`
// REPORT: "status": "needs_a_person",
// REPORT-NEXT: "text": "its batches come from `StepLoader`, a loader class of the project's own that was not sharded
// REPORT: "status": "sharded",
// REPORT-NEXT: "text": "its batches come from `IndexLoader`
// REPORT: "training_loops": {
// REPORT-NEXT: "drawn_per_rank": 0,
// REPORT-NEXT: "needs_a_person": 1,
// REPORT-NEXT: "not_a_data_loop": 0,
// REPORT-NEXT: "sharded": 4,
// REPORT-NEXT: "total": 5
