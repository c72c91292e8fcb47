// libfabric_verify_files.so: which process writes which file, for
// `fabricize verify` (LD_PRELOAD). Each open for writing (open, openat,
// creat, fopen with "w"/"a"/"+") and each rename's target appends
// "<pid>,<parent pid>,<its parent>...\t<absolute path>\n" to the file
// FABRIC_VERIFY_FILES names, one write(2) per line with O_APPEND, so the
// ranks' lines never interleave. The library is preloaded into the
// commands a rank starts too (popen("gnuplot"), system()), which inherit
// the environment; their lines carry the rank among their ancestors. verify
// maps the first pid of a line that is a rank's (through the ranks' records)
// to that rank and reports a file written by more than one rank. Nothing else changes: each call goes on to
// the C library's own function.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

// The parent of `pid` from /proc/<pid>/stat (0 when unknown), read with raw
// system calls: open() and read() of the C library would come back here.
long parent_of(long pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = static_cast<int>(::syscall(SYS_openat, AT_FDCWD, path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd < 0) return 0;
  char buffer[512];
  const ssize_t size = ::read(fd, buffer, sizeof buffer - 1);
  ::close(fd);
  if (size <= 0) return 0;
  buffer[size] = '\0';
  // "pid (command) state ppid ...": the command may hold spaces and ')'.
  const char* end = strrchr(buffer, ')');
  if (end == nullptr) return 0;
  char state = 0;
  long parent = 0;
  return std::sscanf(end + 1, " %c %ld", &state, &parent) == 2 ? parent : 0;
}

// "<pid>,<parent>,<grandparent>,..." up to init, at most 16 levels.
std::string ancestry() {
  std::string text = std::to_string(::getpid());
  long pid = ::getppid();
  for (int level = 0; level < 16 && pid > 1; ++level) {
    text += "," + std::to_string(pid);
    pid = parent_of(pid);
  }
  return text;
}

void note(const char* path) {
  const char* log = std::getenv("FABRIC_VERIFY_FILES");
  if (log == nullptr || path == nullptr) return;
  std::string absolute = path;
  if (path[0] != '/') {
    char cwd[PATH_MAX];
    if (::getcwd(cwd, sizeof cwd) != nullptr) absolute = std::string(cwd) + "/" + path;
  }
  if (absolute == log) return;
  const std::string line = ancestry() + "\t" + absolute + "\n";
  // The raw system call: going through open() would come back here.
  const int fd =
      static_cast<int>(::syscall(SYS_openat, AT_FDCWD, log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644));
  if (fd < 0) return;
  ssize_t ignored = ::write(fd, line.data(), line.size());
  (void)ignored;
  ::close(fd);
}

bool writes(int flags) { return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0; }

bool writes(const char* mode) {
  return mode != nullptr && (strchr(mode, 'w') || strchr(mode, 'a') || strchr(mode, '+'));
}

template <typename Function>
Function next(const char* name) {
  return reinterpret_cast<Function>(::dlsym(RTLD_NEXT, name));
}

mode_t mode_argument(int flags, va_list arguments) {
  return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? static_cast<mode_t>(va_arg(arguments, int)) : 0;
}

}  // namespace

extern "C" {

#define FABRIC_OPEN(name)                                           \
  int name(const char* path, int flags, ...) {                      \
    va_list arguments;                                              \
    va_start(arguments, flags);                                     \
    const mode_t mode = mode_argument(flags, arguments);            \
    va_end(arguments);                                              \
    static auto real = next<int (*)(const char*, int, ...)>(#name); \
    if (writes(flags)) note(path);                                  \
    return real(path, flags, mode);                                 \
  }
FABRIC_OPEN(open)
FABRIC_OPEN(open64)

#define FABRIC_OPENAT(name)                                                               \
  int name(int directory, const char* path, int flags, ...) {                             \
    va_list arguments;                                                                    \
    va_start(arguments, flags);                                                           \
    const mode_t mode = mode_argument(flags, arguments);                                  \
    va_end(arguments);                                                                    \
    static auto real = next<int (*)(int, const char*, int, ...)>(#name);                  \
    if (writes(flags) && (directory == AT_FDCWD || (path && path[0] == '/'))) note(path); \
    return real(directory, path, flags, mode);                                            \
  }
FABRIC_OPENAT(openat)
FABRIC_OPENAT(openat64)

int creat(const char* path, mode_t mode) {
  static auto real = next<int (*)(const char*, mode_t)>("creat");
  note(path);
  return real(path, mode);
}

FILE* fopen(const char* path, const char* mode) {
  static auto real = next<FILE* (*)(const char*, const char*)>("fopen");
  if (writes(mode)) note(path);
  return real(path, mode);
}

FILE* fopen64(const char* path, const char* mode) {
  static auto real = next<FILE* (*)(const char*, const char*)>("fopen64");
  if (writes(mode)) note(path);
  return real(path, mode);
}

int rename(const char* from, const char* to) {
  static auto real = next<int (*)(const char*, const char*)>("rename");
  note(to);
  return real(from, to);
}

}  // extern "C"
