//===- Status.h - Error values for lib/Quant --------------------*- C++ -*-===//
//
// lib/Quant has no LLVM dependency, so it carries its own small error type.
// Every fallible entry point returns a Status (or a Result<T>); nothing in the
// library throws, aborts or prints.
//
//===----------------------------------------------------------------------===//

#ifndef TQ_QUANT_STATUS_H
#define TQ_QUANT_STATUS_H

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace tq::quant {

/// Success, or an error with a one-line human-readable message.
class [[nodiscard]] Status {
public:
  Status() = default;
  static Status success() { return Status(); }
  static Status error(std::string message) {
    Status s;
    s.message_ = std::move(message);
    return s;
  }

  bool ok() const { return !message_.has_value(); }
  explicit operator bool() const { return ok(); }
  /// The error text; empty when ok().
  const std::string &message() const {
    static const std::string empty;
    return message_ ? *message_ : empty;
  }

private:
  std::optional<std::string> message_;
};

/// A value or an error (a small stand-in for C++23 std::expected).
template <typename T> class [[nodiscard]] Result {
public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status error) : v_(std::move(error)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  T &value() { return std::get<T>(v_); }
  const T &value() const { return std::get<T>(v_); }
  T &operator*() { return value(); }
  const T &operator*() const { return value(); }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  /// The error; only meaningful when !ok().
  Status status() const {
    return ok() ? Status::success() : std::get<Status>(v_);
  }

private:
  std::variant<T, Status> v_;
};

} // namespace tq::quant

#endif // TQ_QUANT_STATUS_H
