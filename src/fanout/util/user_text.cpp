// How a user is named in error messages. See user_text.hpp.
#include "fanout/util/user_text.hpp"

#include <fmt/format.h>
#include <pwd.h>

namespace fanout {

std::string describe_uid(uid_t uid) {
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[1024];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found != nullptr) {
    return fmt::format("uid {} ({})", uid, found->pw_name);
  }
  return fmt::format("uid {}", uid);
}

}  // namespace fanout
