#!/usr/bin/python3
"""-o writes a complete copy of the project (issue 41 point 1), tested on a
repository-shaped project whose program reads files beside its sources.

  project_copy_test.py --fabricize BIN --fabric-dir BUILD [--work DIR]

The project: a CMake project in a git work tree, its trainer reading a class
list (list/classes.txt) and a configuration (conf/train.cfg) relative to the
folder it runs from, started by a script (scripts/run.sh, executable), with
a pretrained weights file of 2 MiB, an 80 MiB data folder and a configured
build folder. Checked:
  - migrated with `fabricize --all -p build -o OUT` from the project's
    folder, OUT holds every file but the build folder and .git; small files
    are copies (their own inode) with their permissions, the weights file is
    shared (cloned or hard-linked), the data folder is a link to the
    original, and the summary line says each;
  - the original tree is byte-for-byte and permission-for-permission as it
    was (every file hashed before and after);
  - OUT builds against the runtime, and `scripts/run.sh` run from OUT (the
    original's command line) prints what the original printed from its own
    folder, on 1 process, and trains on 2;
  - a second -o into the same OUT succeeds (links replaced, not doubled);
  - loose files under a home folder: only the sources are written, and the
    tool says why.
"""
import argparse
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_e2e import BUILD_FLAGS  # noqa: E402

TRAIN = r'''#include <torch/torch.h>

#include <fstream>
#include <iostream>
#include <string>
#include <vector>

struct Samples : torch::data::datasets::Dataset<Samples> {
  torch::Tensor inputs, targets;
  Samples(torch::Tensor x, torch::Tensor y) : inputs(std::move(x)), targets(std::move(y)) {}
  torch::data::Example<> get(size_t index) override { return {inputs[index], targets[index]}; }
  torch::optional<size_t> size() const override { return inputs.size(0); }
};

// Reads its class list and its learning rate from files given on the
// command line, relative to where it runs, as research code does.
int main(int argc, char** argv) {
  std::string class_list, config;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--class_list") class_list = argv[i + 1];
    if (flag == "--config") config = argv[i + 1];
  }
  std::ifstream classes_file(class_list);
  if (!classes_file) {
    std::cerr << "cannot open the class list " << class_list << "\n";
    return 2;
  }
  std::vector<std::string> classes;
  for (std::string line; std::getline(classes_file, line);)
    if (!line.empty()) classes.push_back(line);
  std::ifstream config_file(config);
  double lr = 0;
  std::string key;
  if (!(config_file >> key >> lr) || key != "lr") {
    std::cerr << "cannot read lr from " << config << "\n";
    return 2;
  }
  std::ifstream weights("pretrained.bin", std::ios::binary);
  if (!weights) {
    std::cerr << "no pretrained.bin\n";
    return 2;
  }
  std::ifstream data("data/samples.bin", std::ios::binary);
  if (!data) {
    std::cerr << "no data/samples.bin\n";
    return 2;
  }
  const int64_t num_classes = static_cast<int64_t>(classes.size());
  std::cout << "classes " << num_classes << " lr " << lr << std::endl;

  torch::manual_seed(0);
  torch::Device device(torch::kCPU);
  torch::nn::Linear model(8, num_classes);
  model->to(device);
  torch::optim::SGD optimizer(model->parameters(), lr);
  auto inputs = torch::randn({64, 8});
  auto targets = torch::randint(num_classes, {64});
  auto dataset = Samples(inputs, targets).map(torch::data::transforms::Stack<>());
  auto loader = torch::data::make_data_loader<torch::data::samplers::SequentialSampler>(
      std::move(dataset), torch::data::DataLoaderOptions().batch_size(16));
  for (int epoch = 0; epoch < 2; ++epoch) {
    double total = 0;
    int batches = 0;
    for (auto& batch : *loader) {
      auto x = batch.data.to(device);
      auto y = batch.target.to(device);
      optimizer.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      optimizer.step();
      total += loss.item<double>();
      ++batches;
    }
    std::cout << "epoch " << epoch << " loss " << total / batches << std::endl;
  }
  return 0;
}
'''

CMAKE = '''cmake_minimum_required(VERSION 3.18)
project(classify CXX)
set(CMAKE_CXX_STANDARD 17)
find_package(Torch REQUIRED)
set(PROJECT_LIBS ${TORCH_LIBRARIES})
add_executable(classify src/train.cpp)
target_link_libraries(classify PRIVATE ${PROJECT_LIBS})
'''

RUN_SH = '''#!/bin/sh
# Run from the project's folder.
exec ./build/classify --class_list list/classes.txt --config conf/train.cfg
'''

problems = []


def report(message):
    problems.append(message)
    print(f"FAIL {message}", flush=True)


def run(command, **kwargs):
    print("+ " + " ".join(command), flush=True)
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def snapshot(root, skip=("build",)):
    """Every file's content hash, mode and link target, by relative path."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if os.path.relpath(os.path.join(folder, d), root) not in skip)
        for name in sorted(files) + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            if stat.S_ISLNK(info.st_mode):
                seen[os.path.relpath(path, root)] = ("link", os.readlink(path))
                continue
            digest = hashlib.sha256()
            with open(path, "rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    digest.update(block)
            seen[os.path.relpath(path, root)] = (digest.hexdigest(), stat.S_IMODE(info.st_mode))
    return seen


def make_project(repo):
    os.makedirs(os.path.join(repo, ".git"))
    write(os.path.join(repo, ".git", "HEAD"), "ref: refs/heads/main\n")
    write(os.path.join(repo, "CMakeLists.txt"), CMAKE)
    write(os.path.join(repo, "src", "train.cpp"), TRAIN)
    write(os.path.join(repo, "list", "classes.txt"), "cat\ndog\nbird\n")
    write(os.path.join(repo, "conf", "train.cfg"), "lr 0.05\n")
    write(os.path.join(repo, "scripts", "run.sh"), RUN_SH, 0o755)
    with open(os.path.join(repo, "pretrained.bin"), "wb") as f:
        f.write(os.urandom(2 << 20))
    os.makedirs(os.path.join(repo, "data"))
    with open(os.path.join(repo, "data", "samples.bin"), "wb") as f:
        f.truncate(80 << 20)  # sparse: 80 MiB that cost no disk


def build(source, build_dir, prefix):
    # As the end-to-end tests build user projects (run_e2e.py's flags, its
    # compiler and the tests' shared precompiled LibTorch): the test's build
    # speed, not the project's.
    configure = run(["cmake", "-S", source, "-B", build_dir, "-G", "Ninja", *BUILD_FLAGS,
                     "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
                     f"-DCMAKE_PROJECT_INCLUDE={os.path.join(prefix, 'FabricPrecompileAll.cmake')}",
                     f"-DCMAKE_PREFIX_PATH={prefix}"])
    if configure.returncode != 0:
        return f"configuring {source} failed:\n{configure.stdout[-3000:]}{configure.stderr[-3000:]}"
    built = run(["cmake", "--build", build_dir])
    if built.returncode != 0:
        return f"building {source} failed:\n{built.stdout[-4000:]}{built.stderr[-2000:]}"
    return None


def check_copy(repo, out, summary):
    for relative in ("CMakeLists.txt", "src/train.cpp", "list/classes.txt", "conf/train.cfg", "scripts/run.sh",
                     "pretrained.bin"):
        if not os.path.isfile(os.path.join(out, relative)):
            report(f"-o did not write {relative}")
    for relative in (".git", "build"):
        if os.path.lexists(os.path.join(out, relative)):
            report(f"-o copied {relative}/ (version control or build output)")
    for relative in ("list/classes.txt", "conf/train.cfg", "scripts/run.sh"):
        a, b = os.stat(os.path.join(repo, relative)), os.stat(os.path.join(out, relative))
        if (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino):
            report(f"{relative} is hard-linked, not copied (a small file a person edits)")
        if stat.S_IMODE(a.st_mode) != stat.S_IMODE(b.st_mode):
            report(f"{relative}: mode {oct(stat.S_IMODE(b.st_mode))}, the original's {oct(stat.S_IMODE(a.st_mode))}")
    weights = os.path.join(out, "pretrained.bin")
    if os.path.isfile(weights):
        a, b = os.stat(os.path.join(repo, "pretrained.bin")), os.stat(weights)
        linked = (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
        said = "hard-linked" in summary if linked else "cloned" in summary
        if not said:
            report(f"pretrained.bin {'hard-linked' if linked else 'cloned or copied'}, not said so: {summary}")
    data = os.path.join(out, "data")
    if not os.path.islink(data) or os.path.realpath(data) != os.path.realpath(os.path.join(repo, "data")):
        report(f"data/ is not a link to the original folder ({'a folder' if os.path.isdir(data) else 'missing'})")
    for words in ("data folder data/", "linked, not copied", "build/", ".git/"):
        if words not in summary:
            report(f"the summary does not say {words!r}: {summary!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fabricize", required=True)
    parser.add_argument("--fabric-dir", required=True)
    parser.add_argument("--work")
    args = parser.parse_args()
    fabricize = os.path.abspath(args.fabricize)
    prefix = os.path.abspath(args.fabric_dir)
    work = args.work or tempfile.mkdtemp(prefix="fabricize-project-copy-")
    shutil.rmtree(work, ignore_errors=True)
    repo, out = os.path.join(work, "repo"), os.path.join(work, "out")
    make_project(repo)
    problem = build(repo, os.path.join(repo, "build"), prefix)
    if problem:
        print(f"FAIL {problem}")
        return 1
    before = snapshot(repo)
    original = run(["scripts/run.sh"], cwd=repo)
    if original.returncode != 0 or "classes 3" not in original.stdout:
        print(f"FAIL the original did not run from its folder (exit {original.returncode}):\n"
              f"{original.stdout}{original.stderr}")
        return 1

    migrated = run([fabricize, "--all", "-p", "build", "-o", out], cwd=repo)
    print(migrated.stderr)
    if migrated.returncode not in (0, 1):
        print(f"FAIL fabricize exited {migrated.returncode}")
        return 1
    summary = next((line for line in migrated.stderr.splitlines() if "the project's other files" in line), "")
    check_copy(repo, out, summary)
    if snapshot(repo) != before:
        report("the original project changed")

    # Again into the same folder: the links replaced, nothing doubled.
    again = run([fabricize, "--all", "-p", "build", "-o", out, "--quiet"], cwd=repo)
    if again.returncode not in (0, 1):
        report(f"a second -o into {out} exited {again.returncode}:\n{again.stderr}")
    if os.path.lexists(os.path.join(out, "data", "data")) or not os.path.islink(os.path.join(out, "data")):
        report("a second -o changed data/ (a link inside the link, or no link)")

    problem = build(out, os.path.join(out, "build"), prefix)
    if problem:
        report(problem)
    else:
        env = {**os.environ, "LT_ACCELERATOR": "cpu", "LT_DEVICES": "1"}
        one = run(["scripts/run.sh"], cwd=out, env=env)
        if one.returncode != 0 or one.stdout != original.stdout:
            report(f"run from out/ with the original's command line (exit {one.returncode}) printed\n"
                   f"{one.stdout}{one.stderr}\nthe original printed\n{original.stdout}")
        two = run(["scripts/run.sh"], cwd=out, env={**env, "LT_DEVICES": "2"})
        if two.returncode != 0 or "classes 3" not in two.stdout or "epoch 1 loss" not in two.stdout:
            report(f"2 ranks from out/ (exit {two.returncode}):\n{two.stdout}{two.stderr}")
    if snapshot(repo) != before:
        report("the original project changed after building and running out/")

    # Loose files under a home folder: nobody's project.
    home = os.path.join(work, "home")
    write(os.path.join(home, "train.cpp"), TRAIN)
    write(os.path.join(home, "notes.txt"), "my notes\n")
    loose = run([fabricize, "train.cpp", "-o", os.path.join(work, "loose-out")], cwd=home,
                env={**os.environ, "HOME": home})
    if loose.returncode not in (0, 1) or "is not a project folder" not in loose.stderr:
        report(f"-o from a home folder (exit {loose.returncode}) did not say why it copied only sources:\n"
               f"{loose.stderr}")
    if os.path.exists(os.path.join(work, "loose-out", "notes.txt")):
        report("-o from a home folder copied the home folder's other files")

    if problems:
        print(f"{len(problems)} problem(s)")
        return 1
    print("the project was copied whole, built and ran from out/ as from the original folder")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
