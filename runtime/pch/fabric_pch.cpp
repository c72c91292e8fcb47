// Exists only so that CMake has a translation unit through which to build the
// precompiled <torch/torch.h> that the runtime and its tests reuse.
