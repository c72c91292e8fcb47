// fsdp's sharded checkpoints (Options::fsdp_state_dict_type "sharded", the
// default): no rank ever holds the whole model or optimizer state to write
// or read one.
//
//   PATH/                          a directory
//     latest                       "<generation> <ranks>": the last complete save
//     gen-<g>/shard-<k>-of-<n>.pt  rank k's part, in the State format:
//       module entries    the parameters rank k owns (Module::save's layout,
//                         the others left out); rank 0 adds the frozen ones
//                         and the buffers, and a manifest of every tensor
//       optimizer entries rank k's optimizer state (only what it owns)
//       everything else   rank 0 only (with the names, kinds, loss scale)
//
// A save writes a new generation and then, once every rank's part is in
// place, replaces `latest` (a file renamed over the old one); a job killed
// at any moment leaves `latest` naming a complete generation (or, for the
// first sharded save over a one-file checkpoint, that file moved aside to
// PATH.replaced-by-sharded, which load then names). Parameters
// and optimizer states are keyed by name and by position in the optimizer,
// not by owner, so any strategy on any number of ranks loads them: each
// rank reads the parts one at a time and keeps what it owns.
#include <fabric/fabric.h>

#include "plugins/io/checkpoint_format.h"
#include "plugins/io/checkpoint_load.h"
#include "strategies/strategy.h"
#include "launchers/launcher.h"
#include "strategies/storage_materializer.h"

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace fabric {
namespace {

// POSIX, not std::filesystem: LibTorch 2.x's libtorch.so exports its own
// copies of std::filesystem's symbols, and ours then resolve to them (a
// crash in remove_all, measured with the PyPI wheel).
[[noreturn]] void throw_errno(const std::string& what, const std::string& path) {
  throw std::runtime_error("cannot " + what + " '" + path + "': " + std::strerror(errno));
}

bool exists(const std::string& path) {
  struct stat status{};
  return ::stat(path.c_str(), &status) == 0;
}

void make_directory(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) throw_errno("create the directory", path);
}

// Removes `path` and everything under it; nothing there is fine.
void remove_tree(const std::string& path) {
  if (!exists(path)) return;
  const auto remove_one = [](const char* entry, const struct stat*, int, struct FTW*) {
    return ::remove(entry) == 0 || errno == ENOENT ? 0 : -1;
  };
  if (::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) != 0) throw_errno("remove", path);
}

std::vector<std::string> directory_entries(const std::string& path) {
  std::vector<std::string> names;
  DIR* directory = ::opendir(path.c_str());
  if (directory == nullptr) throw_errno("list", path);
  while (const dirent* entry = ::readdir(directory)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(directory);
  return names;
}

constexpr const char* kShardRankKey = "fabric_shard_rank";
constexpr const char* kShardCountKey = "fabric_shard_count";
constexpr const char* kLatestFile = "latest";
std::string manifest_key(size_t index) { return "manifest" + std::to_string(index); }
std::string generation_folder(const std::string& path, int64_t generation) {
  return path + "/gen-" + std::to_string(generation);
}
std::string shard_path(const std::string& folder, int64_t rank, int64_t count) {
  return folder + "/shard-" + std::to_string(rank) + "-of-" + std::to_string(count) + ".pt";
}

// Module::save's layout with only the tensors `keep` selects.
void save_module_part(const torch::nn::Module& module, torch::serialize::OutputArchive& archive,
                      const std::function<bool(const at::Tensor&, bool buffer)>& keep) {
  for (const auto& item : module.named_parameters(/*recurse=*/false)) {
    if (keep(item.value(), false)) archive.write(item.key(), item.value());
  }
  for (const auto& item : module.named_buffers(/*recurse=*/false)) {
    if (keep(item.value(), true)) archive.write(item.key(), item.value(), /*is_buffer=*/true);
  }
  for (const auto& child : module.named_children()) {
    if (!child.value()->is_serializable()) continue;
    torch::serialize::OutputArchive nested(archive.compilation_unit());
    save_module_part(*child.value(), nested, keep);
    archive.write(child.key(), nested);
  }
}

// Every tensor of `module` by its dotted name, and its shape ("2x3").
std::map<std::string, std::string> tensor_shapes(const torch::nn::Module& module) {
  std::map<std::string, std::string> shapes;
  const auto shape = [](const at::Tensor& tensor) {
    std::string text;
    for (int64_t d = 0; d < tensor.dim(); ++d) text += (d > 0 ? "x" : "") + std::to_string(tensor.size(d));
    return text.empty() ? std::string("scalar") : text;
  };
  for (const auto& item : module.named_parameters()) shapes[item.key()] = shape(item.value());
  for (const auto& item : module.named_buffers()) shapes[item.key()] = shape(item.value());
  return shapes;
}

// Where a one-file checkpoint at the path of a sharded save waits until the
// new one is complete (then it is removed).
std::string replaced_file(const std::string& path) { return path + ".replaced-by-sharded"; }

// Rank 0, before the parts are written: the folder of the next generation,
// empty. Returns its number.
int64_t prepare_generation(const std::string& path) {
  struct stat status{};
  if (::stat(path.c_str(), &status) == 0 && !S_ISDIR(status.st_mode)) {
    // A one-file checkpoint (fabric.save(path, model), or "full" before):
    // replaced, as Lightning does, but only removed once the new one is.
    if (::rename(path.c_str(), replaced_file(path).c_str()) != 0) throw_errno("move aside", path);
  }
  make_directory(path);
  int64_t generation = 0;
  std::ifstream latest(path + "/" + kLatestFile);
  if (latest) latest >> generation;
  const std::string folder = generation_folder(path, generation + 1);
  remove_tree(folder);  // left by a save that was interrupted
  make_directory(folder);
  return generation + 1;
}

// "<generation> <ranks>" from PATH/latest.
std::pair<int64_t, int64_t> read_latest(const std::string& path) {
  std::ifstream latest(path + "/" + kLatestFile);
  int64_t generation = 0;
  int64_t ranks = 0;
  if (!latest || !(latest >> generation >> ranks) || generation < 1 || ranks < 1) {
    // The first sharded save over a one-file checkpoint moved that file
    // aside and did not finish.
    const std::string moved = replaced_file(path);
    throw CheckpointError(
        "fabric::load: '" + path +
        "' is a directory without a readable 'latest' file, so not a complete sharded checkpoint (was its first "
        "save interrupted?)" +
        (exists(moved) ? ". The one-file checkpoint that was at this path before is at '" + moved +
                             "': load that file, or move it back"
                       : ". Pass the path fabric.save wrote, or a checkpoint file"));
  }
  return {generation, ranks};
}

// Rank 0's part also lists every module's tensors and shapes, checked
// against the model before a load writes anything.
void write_manifests(torch::serialize::OutputArchive& archive, const State& state) {
  for (size_t index = 0; index < state.entries().size(); ++index) {
    const auto* module = std::get_if<std::shared_ptr<torch::nn::Module>>(&state.entries()[index].target());
    if (module == nullptr) continue;
    c10::List<std::string> names;
    c10::List<std::string> shapes;
    for (const auto& [name, shape] : tensor_shapes(**module)) {
      names.push_back(name);
      shapes.push_back(shape);
    }
    torch::serialize::OutputArchive manifest;
    manifest.write("names", c10::IValue(names));
    manifest.write("shapes", c10::IValue(shapes));
    archive.write(manifest_key(index), manifest);
  }
}

// This rank's part of a sharded checkpoint at `part_path`: the parameters it
// owns (rank 0 also what no rank owns), their optimizer state, and on rank 0
// every other entry.
void write_own_part(const detail::Strategy& strategy, const State& state, const detail::RandomStates& random_states,
                    const std::string& part_path, int rank) {
  // Rank 0 writes what no rank owns (frozen parameters, buffers).
  const auto keep = [&strategy, rank](const at::Tensor& tensor, bool buffer) {
    const int owner = buffer ? -1 : strategy.owner_of(tensor);
    return owner == rank || (owner < 0 && rank == 0);
  };
  torch::serialize::OutputArchive archive;
  std::ostringstream bytes(std::ios::out | std::ios::binary);
  {
    // Only tensors this rank holds are written: nothing may start a fill.
    detail::StorageMaterializer::Pause pause;
    detail::write_state_archive(archive, state, strategy.precision().scaler(), random_states,
                                {[&keep](const torch::nn::Module& module, torch::serialize::OutputArchive& nested) {
                                   save_module_part(module, nested, keep);
                                 },
                                 rank == 0});
    archive.write(kShardRankKey, c10::IValue(static_cast<int64_t>(rank)));
    archive.write(kShardCountKey, c10::IValue(static_cast<int64_t>(strategy.collectives().placement().world_size)));
    if (rank == 0) write_manifests(archive, state);
    archive.save_to(bytes);
  }
  strategy.checkpoint_io().write(part_path, bytes.str());
}

// Where a sharded checkpoint's latest save is, and where in its files the
// state's entries are.
struct ShardedLoad {
  std::string folder;
  int64_t parts = 0;
  std::vector<size_t> file_index_of_entry;
};

[[noreturn]] void fail_load(const std::string& path, const std::string& why) {
  throw CheckpointError("fabric::load: '" + path + "': " + why);
}

// Everything that can be checked from rank 0's part (names, kinds, the
// manifest of every module's tensors against the model), and that every
// part is there and intact, before anything is written.
ShardedLoad check_sharded_load(const detail::CheckpointIO& io, torch::Device device, const std::string& path,
                               const State& state, bool strict) {
  const auto fail = [&path](const std::string& why) { fail_load(path, why); };
  ShardedLoad plan;
  const auto [generation, ranks] = read_latest(path);
  plan.folder = generation_folder(path, generation);
  plan.parts = ranks;
  plan.file_index_of_entry.assign(state.entries().size(), 0);
  // Every part there and intact (CRC) before anything is written: a load
  // cannot stop half way for a damaged part.
  for (int64_t k = 0; k < plan.parts; ++k) {
    if (!exists(shard_path(plan.folder, k, plan.parts))) {
      fail("part " + std::to_string(k) + " of " + std::to_string(plan.parts) + " (" +
           shard_path(plan.folder, k, plan.parts) + ") is missing; every rank's part of the last save must be there");
    }
    io.verify(shard_path(plan.folder, k, plan.parts));
  }
  torch::serialize::InputArchive first;
  io.open(shard_path(plan.folder, 0, plan.parts), first, device);
  const auto names = detail::read_string_list(first, detail::kNamesKey, path);
  const auto kinds = detail::read_string_list(first, detail::kKindsKey, path);
  for (size_t position = 0; position < state.entries().size(); ++position) {
    const StateEntry& entry = state.entries()[position];
    const auto found = std::find(names.begin(), names.end(), entry.name());
    if (found == names.end()) fail("the checkpoint has no '" + entry.name() + "'");
    const size_t index = static_cast<size_t>(found - names.begin());
    if (kinds[index] != entry.kind()) {
      fail("'" + entry.name() + "' holds a " + kinds[index] + " in the checkpoint, but a " + entry.kind() +
           " was passed to load it into");
    }
    plan.file_index_of_entry[position] = index;
    const auto* module = std::get_if<std::shared_ptr<torch::nn::Module>>(&entry.target());
    if (module == nullptr) continue;
    torch::serialize::InputArchive manifest;
    if (!first.try_read(manifest_key(index), manifest)) fail("corrupted: no manifest of '" + entry.name() + "'");
    const auto saved_names = detail::read_string_list(manifest, "names", path);
    const auto saved_shapes = detail::read_string_list(manifest, "shapes", path);
    std::map<std::string, std::string> saved;
    for (size_t i = 0; i < saved_names.size() && i < saved_shapes.size(); ++i) saved[saved_names[i]] = saved_shapes[i];
    for (const auto& [name, shape] : tensor_shapes(**module)) {
      const auto held = saved.find(name);
      if (held == saved.end()) fail("cannot load '" + entry.name() + "': the checkpoint has no tensor '" + name + "'");
      if (held->second != shape) {
        fail("cannot load '" + entry.name() + "': " + name + " has shape " + held->second + " in the checkpoint but " +
             shape + " in the model");
      }
    }
  }
  if (strict) {
    for (const auto& name : names) {
      bool requested = false;
      for (const auto& entry : state.entries()) requested = requested || entry.name() == name;
      if (!requested) {
        fail("the checkpoint also holds '" + name +
             "', which the state does not name (pass strict = false to ignore it)");
      }
    }
  }
  return plan;
}

// The parts one at a time: each rank keeps what it owns of each. The
// strategy learns of every module's new values even when a part fails half
// way (it records them as in sync).
void apply_sharded_load(detail::Strategy& strategy, const ShardedLoad& plan, const State& state) {
  struct ModulesLoaded {
    const State& state;
    detail::Strategy& strategy;
    ~ModulesLoaded() {
      for (const auto& entry : state.entries()) {
        if (const auto* module = std::get_if<std::shared_ptr<torch::nn::Module>>(&entry.target())) {
          strategy.module_loaded(**module);
        }
      }
    }
  } modules_loaded{state, strategy};
  for (int64_t k = 0; k < plan.parts; ++k) {
    torch::serialize::InputArchive part;
    strategy.checkpoint_io().open(shard_path(plan.folder, k, plan.parts), part, strategy.device());
    for (size_t position = 0; position < state.entries().size(); ++position) {
      const StateEntry& entry = state.entries()[position];
      const std::string key = detail::entry_key(plan.file_index_of_entry[position]);
      if (const auto* module = std::get_if<std::shared_ptr<torch::nn::Module>>(&entry.target())) {
        torch::serialize::InputArchive nested;
        if (!part.try_read(key, nested)) continue;
        detail::TensorCopies copies;
        detail::collect_module_tensors(**module, nested, "", copies, /*partial=*/true);
        detail::copy_module_tensors(copies);
      } else if (auto* const* optimizer = std::get_if<torch::optim::Optimizer*>(&entry.target())) {
        torch::serialize::InputArchive nested;
        if (!part.try_read(key, nested)) continue;
        // LibTorch's load adds the part's states and keeps the others;
        // the strategy drops what this rank does not own at once.
        (*optimizer)->load(nested);
        strategy.optimizer_loaded(**optimizer);
      }
    }
  }
}

}  // namespace

bool detail::is_sharded_checkpoint(const std::string& path) {
  struct stat status{};
  return ::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode);
}

bool Fabric::saves_sharded() const {
  const detail::Strategy& strategy = this->strategy();
  return strategy.name() == "fsdp" && strategy.collectives().connected() &&
         strategy.options().fsdp_state_dict_type() == "sharded";
}

void Fabric::save_sharded(const std::string& path, const State& state) {
  auto scope = strategy().collectives().scope("fabric.save()");
  detail::RandomStates random_states;
  random_states = detail::gather_random_states(strategy().collectives(), state, generator_states());

  std::string generation;
  if (is_global_zero()) {
    try {
      generation = std::to_string(prepare_generation(path));
    } catch (const std::exception& error) {
      generation = std::string("error: ") + error.what();
    }
  }
  generation = broadcast(generation, 0);
  if (generation.rfind("error: ", 0) == 0) {
    throw CheckpointError("fabric::save: cannot write the sharded checkpoint '" + path + "': " + generation.substr(7));
  }
  const std::string folder = path + "/gen-" + generation;

  // Each rank's owned parameters and their optimizer state whole while it
  // writes them (fsdp keeps pieces of both).
  std::vector<torch::optim::Optimizer*> optimizers;
  for (const auto& entry : state.entries()) {
    if (auto* const* optimizer = std::get_if<torch::optim::Optimizer*>(&entry.target()))
      optimizers.push_back(*optimizer);
  }
  auto undo = strategy().collectives().run("fabric.save()", [&] { return strategy().hold_owned_state(optimizers); });
  struct Undo {
    std::function<void()>& step;
    ~Undo() {
      if (step) step();
    }
  } undo_at_exit{undo};

  const int rank = global_rank();
  std::string error;
  try {
    write_own_part(strategy(), state, random_states, shard_path(folder, rank, world_size()), rank);
  } catch (const std::exception& failure) {
    error = "fabric::save: rank " + std::to_string(rank) + " could not write its part of '" + path +
            "': " + detail::first_line_of(detail::message_of(failure));
  }
  // Every part in place before `latest` names the generation.
  detail::agree_on_load(strategy().collectives(), error);

  std::string published;
  if (is_global_zero()) {
    try {
      strategy().checkpoint_io().write(path + "/" + kLatestFile,
                                       generation + " " + std::to_string(world_size()) + "\n");
      for (const auto& name : directory_entries(path)) {
        if (name.rfind("gen-", 0) == 0 && path + "/" + name != folder) remove_tree(path + "/" + name);
      }
      remove_tree(replaced_file(path));
    } catch (const std::exception& failure) {
      published = failure.what();
    }
  }
  finish_save(path, published);
}

void Fabric::load_sharded(const std::string& path, const State& state, bool strict) {
  auto scope = strategy().collectives().scope("fabric.load()");
  ShardedLoad plan;
  const auto check = [&] { plan = check_sharded_load(strategy().checkpoint_io(), device(), path, state, strict); };
  detail::agree_on_load(strategy().collectives(), detail::load_error_of(path, check));
  const auto apply = [&] { apply_sharded_load(strategy(), plan, state); };
  detail::agree_on_load(strategy().collectives(), detail::load_error_of(path, apply));

  // Everything else is in rank 0's part, in the one-file format.
  State others{};
  for (const auto& entry : state.entries()) {
    if (!std::holds_alternative<std::shared_ptr<torch::nn::Module>>(entry.target()) &&
        !std::holds_alternative<torch::optim::Optimizer*>(entry.target())) {
      others.add(entry);
    }
  }
  load(shard_path(plan.folder, 0, plan.parts), others, /*strict=*/false);
}

}  // namespace fabric
