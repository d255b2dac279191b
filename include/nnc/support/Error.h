// Errors as values: nnc::Error and nnc::Expected<T>, plus the two kinds of checks.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include <fmt/format.h>

namespace nnc {

/// A possibly-failed result without a value. Like llvm::Error, it converts to true when it
/// holds a failure: `if (Error e = f()) return e;`.
class [[nodiscard]] Error {
public:
  /// Returns an Error that holds no failure.
  static Error success() { return Error(); }
  explicit Error(std::string message) : message_(std::move(message)) {}

  explicit operator bool() const { return message_.has_value(); }
  /// The failure's message; empty for success.
  const std::string &message() const {
    static const std::string empty;
    return message_ ? *message_ : empty;
  }
  /// Returns a copy whose message is prefixed with `context: `.
  Error withContext(const std::string &context) const {
    if (!message_)
      return *this;
    return Error(context + ": " + *message_);
  }

private:
  Error() = default;
  std::optional<std::string> message_;
};

/// Formats an error message like fmt::format.
template <typename... Args> Error makeError(fmt::format_string<Args...> f, Args &&...args) {
  return Error(fmt::format(f, std::forward<Args>(args)...));
}

/// A value or an Error. Converts to true when it holds a value.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)), error_(Error::success()) {}
  Expected(Error error) : error_(std::move(error)) {
    if (!error_)
      error_ = Error("internal error: Expected constructed from a success Error");
  }
  template <typename U,
            typename = std::enable_if_t<std::is_convertible_v<U, T> && !std::is_same_v<U, T> &&
                                        !std::is_same_v<std::decay_t<U>, Error>>>
  Expected(U &&value) : value_(T(std::forward<U>(value))), error_(Error::success()) {}

  explicit operator bool() const { return value_.has_value(); }
  T &operator*() { return *value_; }
  const T &operator*() const { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }
  T &get() { return *value_; }
  /// The held error (success when a value is held).
  Error takeError() const { return error_; }
  const Error &error() const { return error_; }

private:
  std::optional<T> value_;
  Error error_;
};

[[noreturn]] inline void assertionFailed(const char *cond, const char *file, int line,
                                         const std::string &msg) {
  std::fprintf(stderr, "nnc: internal error at %s:%d: assertion `%s` failed%s%s\n", file, line,
               cond, msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

} // namespace nnc

/// A compiler bug: aborts with file and line. Never use for bad user input.
#define NNC_ASSERT(cond, ...)                                                                      \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      ::nnc::assertionFailed(#cond, __FILE__, __LINE__, ::fmt::format("" __VA_ARGS__));           \
  } while (0)

/// Bad user input: returns an Error from the enclosing function (which returns Error or
/// Expected<T>), with a message formatted like fmt::format.
#define NNC_USER_CHECK(cond, ...)                                                                  \
  do {                                                                                             \
    if (!(cond))                                                                                   \
      return ::nnc::makeError(__VA_ARGS__);                                                        \
  } while (0)

#define NNC_CONCAT_IMPL(a, b) a##b
#define NNC_CONCAT(a, b) NNC_CONCAT_IMPL(a, b)

/// Propagates a failed Error: `NNC_TRY(verify(g));`
#define NNC_TRY(expr)                                                                              \
  do {                                                                                             \
    if (::nnc::Error nncErr_ = (expr))                                                             \
      return nncErr_;                                                                              \
  } while (0)

/// Declares `decl` from an Expected, or returns its error:
/// `NNC_ASSIGN_OR_RETURN(auto t, readTensor(path));`
#define NNC_ASSIGN_OR_RETURN(decl, expr)                                                           \
  auto NNC_CONCAT(nncExp_, __LINE__) = (expr);                                                     \
  if (!NNC_CONCAT(nncExp_, __LINE__))                                                              \
    return NNC_CONCAT(nncExp_, __LINE__).takeError();                                              \
  decl = std::move(*NNC_CONCAT(nncExp_, __LINE__))
