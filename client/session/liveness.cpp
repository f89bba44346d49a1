// Is the job's interchange alive? See liveness.hpp.
#include "client/session/liveness.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>

#include "fanout/protocol/ready_file.hpp"
#include "fanout/util/fs.hpp"

namespace fanout::client {

std::string InterchangeLiveness::describe() const {
  if (state != State::Dead) return {};
  return fmt::format("the interchange (pid {} on {}) is not running", pid, host);
}

bool runs_interchange(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  auto comm = read_file(fmt::format("/proc/{}/comm", pid));
  // Without /proc the signal check is all there is.
  if (!comm) return ::kill(pid, 0) == 0 || errno == EPERM;
  // The kernel keeps 15 characters of the name: "fanout-intercha".
  if (comm->rfind("fanout-intercha", 0) != 0) return false;
  // A zombie (no one reaped it yet) is dead: the state follows the ")" closing its name.
  auto stat = read_file(fmt::format("/proc/{}/stat", pid));
  if (!stat) return true;
  const auto paren = stat->rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat->size()) return true;
  const char state = (*stat)[paren + 2];
  return state != 'Z' && state != 'X';
}

InterchangeLiveness interchange_liveness(const std::string& ready_text,
                                         const std::string& this_host,
                                         bool (*is_interchange)(pid_t)) {
  InterchangeLiveness l;
  // A damaged file tells nothing: the state stays Unknown.
  auto ready = proto::parse_ready(ready_text, "interchange.ready");
  if (!ready) return l;
  l.host = ready->host;
  if (ready->pid <= 0) return l;
  l.pid = static_cast<pid_t>(ready->pid);
  // A pid means something only on the host that wrote it (the run folder may be shared).
  if (l.host.empty() || l.host != this_host) return l;
  const bool alive = (is_interchange != nullptr ? is_interchange : runs_interchange)(l.pid);
  l.state = alive ? InterchangeLiveness::State::Alive : InterchangeLiveness::State::Dead;
  return l;
}

InterchangeLiveness interchange_liveness_in(const std::string& run_dir) {
  const std::string path = run_dir + "/interchange.ready";
  auto text = read_file(path);
  if (!text) return {};
  auto l = interchange_liveness(*text, host_name());
  // A ready file without a pid is `fanout run --interchange`'s pointer, written by the client.
  if (struct stat st{}; l.pid != 0 && ::stat(path.c_str(), &st) == 0) {
    l.started = static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec / 1e9;
  }
  return l;
}

}  // namespace fanout::client
