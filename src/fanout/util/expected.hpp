// Expected<T>: a value or an Error, with the interface of C++23 std::expected<T, Error>.
// GCC 12 ships <expected> only in C++23 mode; this alias point lets us swap it in later.
#pragma once

#include <utility>
#include <variant>

#include "fanout/util/error.hpp"

namespace fanout {

// Wraps an Error so that `return Unexpected{err};` converts to any Expected<T>.
struct Unexpected {
  Error error;
};

inline Unexpected make_error(ErrorCode code, std::string message) {
  return Unexpected{Error{code, std::move(message)}};
}

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(const T& v) : v_(std::in_place_index<0>, v) {}        // NOLINT: implicit like std
  Expected(T&& v) : v_(std::in_place_index<0>, std::move(v)) {}  // NOLINT
  Expected(Unexpected u) : v_(std::in_place_index<1>, std::move(u.error)) {}  // NOLINT

  [[nodiscard]] bool has_value() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return has_value(); }

  // Precondition: has_value(). Throws Failure carrying the error otherwise.
  T& value() & {
    if (!has_value()) throw Failure(std::get<1>(v_));
    return std::get<0>(v_);
  }
  const T& value() const& {
    if (!has_value()) throw Failure(std::get<1>(v_));
    return std::get<0>(v_);
  }
  T&& value() && {
    if (!has_value()) throw Failure(std::get<1>(v_));
    return std::get<0>(std::move(v_));
  }
  T& operator*() & { return std::get<0>(v_); }
  const T& operator*() const& { return std::get<0>(v_); }
  T* operator->() { return &std::get<0>(v_); }
  const T* operator->() const { return &std::get<0>(v_); }

  // Precondition: !has_value().
  [[nodiscard]] const Error& error() const& { return std::get<1>(v_); }
  [[nodiscard]] Error&& error() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Error> v_;
};

// Expected<void>: success or an Error.
template <>
class [[nodiscard]] Expected<void> {
 public:
  Expected() = default;
  Expected(Unexpected u) : err_(std::move(u.error)), ok_(false) {}  // NOLINT
  [[nodiscard]] bool has_value() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  void value() const {
    if (!ok_) throw Failure(err_);
  }
  [[nodiscard]] const Error& error() const& { return err_; }

 private:
  Error err_{};
  bool ok_ = true;
};

}  // namespace fanout
