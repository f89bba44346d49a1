// How a user is named in error messages. See user_text.cpp.
#pragma once

#include <sys/types.h>

#include <string>

namespace fanout {

// "uid 1001 (alice)", or "uid 1001" when the account has no name.
std::string describe_uid(uid_t uid);

}  // namespace fanout
