// The one result type of shmguard's fallible calls: a value, or a message saying what went wrong
// (naming the file and line where there is one). Pure code returns these instead of throwing.
// The rules, in one place:
// - Every function of a module's API that can fail returns Result<T> (Status when there is no
//   value) and throws nothing.
// - A library that reports by throwing (yaml-cpp's parser, nlohmann's patch, CLI11) is caught at the
//   one call that raises, and turned into a failure there.
// - A recursive walk (the JSON reader, the YAML tree walks, the surgical editor) may abort at any
//   depth with a type private to its file; the one function that starts the walk catches it and
//   returns a Result. Such types never cross a module's API.
// - Exit codes come from cli/exit_codes.h, applied in cli/ alone.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace shmguard {

// A failure on its way to a Result of any type: `return Failure{"why"};`, or a callee's failure
// passed up as it is: `if (!r) return r.failure_part();`.
struct Failure {
  std::string message;
  int line = 0;  // where in the input (1-based), when known
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor): return x;
  Result(Failure f) : error_(std::move(f.message)), line_(f.line) {}  // NOLINT: return Failure{...};
  // `line`: where in the input the failure is (1-based), when the caller can point at one.
  static Result failure(std::string message, int line = 0) {
    Result r;
    r.error_ = std::move(message);
    r.line_ = line;
    return r;
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  const T* operator->() const { return &*value_; }
  const std::string& error() const { return error_; }
  int line() const { return line_; }
  // This failure, to return from a function of another Result type.
  Failure failure_part() const { return {error_, line_}; }

 private:
  Result() = default;
  std::optional<T> value_;
  std::string error_;
  int line_ = 0;
};

// For calls that return nothing but can fail: `return Ok{};` or `return Status::failure(why);`.
struct Ok {};
using Status = Result<Ok>;

}  // namespace shmguard
