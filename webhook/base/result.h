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

// A failure on its way to a Result of any type, the one way to make one: `return Failure{"why"};`
// (with the line, 1-based, when the caller can point at one: `Failure{"why", line}`), or a callee's
// failure passed up as it is: `if (!r) return r.failure_part();`.
// `kind` is a module's own small enum (0: its default), for callers that must tell failures apart
// (surgical.h's EditFailure, yaml_doc.h's ParseFailure): they switch on it, never on the message.
struct Failure {
  std::string message;
  int line = 0;  // where in the input (1-based), when known
  int kind = 0;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor): return x;
  Result(Failure f) : error_(std::move(f.message)), line_(f.line), kind_(f.kind) {}  // NOLINT: return Failure{...};
  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const T& operator*() const& { return *value_; }
  T& operator*() & { return *value_; }
  T&& operator*() && { return std::move(*value_); }
  const T* operator->() const { return &*value_; }
  const std::string& error() const { return error_; }
  int line() const { return line_; }
  // The failing module's enum for what went wrong (Failure::kind).
  template <typename Kind>
  Kind kind() const {
    return static_cast<Kind>(kind_);
  }
  // This failure, to return from a function of another Result type.
  Failure failure_part() const { return {error_, line_, kind_}; }

 private:
  Result() = default;
  std::optional<T> value_;
  std::string error_;
  int line_ = 0;
  int kind_ = 0;
};

// For calls that return nothing but can fail: `return Ok{};` or `return Failure{why};`.
struct Ok {};
using Status = Result<Ok>;

}  // namespace shmguard
