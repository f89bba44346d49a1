// fanout-worker: hosts the command or native runtime in one worker process, speaking the worker
// pipe of docs/worker-pipe.md on fds 3 (requests) and 4 (replies). Started by fanout-pool:
//   fanout-worker command '<command line>' [user args...]
//   fanout-worker native <library.so | builtin:noop> [user args...]
#include <fcntl.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "pool/fork_proxy.hpp"
#include "pool/worker_host.hpp"

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "fork-via") == 0)
    return fanout::pool::run_fork_proxy(argc, argv);
  if (argc < 3 || (std::strcmp(argv[1], "command") != 0 && std::strcmp(argv[1], "native") != 0)) {
    std::fprintf(stderr,
                 "usage: fanout-worker command '<command line>' [args...]\n"
                 "       fanout-worker native <library.so|builtin:noop> [args...]\n"
                 "(started by fanout-pool, with the worker pipe on fds 3 and 4)\n");
    return 2;
  }
  // Like the Python shim: fds 3 and 4 must be the pool's pipe, and programs we start must not
  // inherit them.
  for (int fd : {3, 4}) {
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags < 0) {
      std::fprintf(stderr, "fanout-worker: fd %d is not open (start me from fanout-pool)\n", fd);
      return 2;
    }
    ::fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
  std::signal(SIGPIPE, SIG_IGN);
  fanout::worker::RuntimeOptions opts;
  opts.kind = argv[1];
  opts.target = argv[2];
  for (int i = 3; i < argc; ++i) opts.args.emplace_back(argv[i]);
  const char* append = std::getenv("FANOUT_APPEND_ROW");
  opts.append_row = append == nullptr || std::string(append) != "0";
  const char* items = std::getenv("FANOUT_COMMAND_ITEMS");
  opts.items_by_exit_status = items != nullptr && std::string(items) == "exit_status";
  auto rt = fanout::worker::make_runtime(opts);
  if (!rt) {
    std::fprintf(stderr, "%s\n", rt.error().message.c_str());
    return 2;
  }
  return fanout::worker::serve(**rt, 3, 4);
}
