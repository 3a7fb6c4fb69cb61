// Status and Result<T>: the error tier for what a caller can handle (STYLE §7).
// No exception crosses the library API; broken invariants use EMO_CHECK (check.h).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace emo {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad user input: flags, regexes, values out of bounds
  kNotFound,         // a file, a device model, a named entity that does not exist
  kParseError,       // a file that cannot be a trace / model / profile
  kUnsupported,      // a recognised input EMO does not handle (e.g. a ROCm trace)
  kIoError,          // reading or writing failed
  kInternal,         // a bug; prefer EMO_CHECK when the state is unrecoverable
};

std::string_view StatusCodeName(StatusCode code);

// The result of an operation that can fail; carries a message naming the file or event.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", for printing to a user.
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgument(std::string message);
Status NotFound(std::string message);
Status ParseError(std::string message);
Status Unsupported(std::string message);
Status IoError(std::string message);
Status Internal(std::string message);

// Either a value or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : data_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : data_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(data_); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(data_);
  }
  T& value() & { return std::get<T>(data_); }
  const T& value() const& { return std::get<T>(data_); }
  T&& value() && { return std::get<T>(std::move(data_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> data_;
};

}  // namespace emo

#define EMO_STATUS_CONCAT_INNER(a, b) a##b
#define EMO_STATUS_CONCAT(a, b) EMO_STATUS_CONCAT_INNER(a, b)

// Returns early from the enclosing function when `expr` yields a non-OK Status.
#define EMO_RETURN_IF_ERROR(expr)              \
  do {                                         \
    ::emo::Status emo_status_ = (expr);        \
    if (!emo_status_.ok()) return emo_status_; \
  } while (0)

// `EMO_ASSIGN_OR_RETURN(auto x, F())` declares x from a Result, or returns its Status.
#define EMO_ASSIGN_OR_RETURN(lhs, expr) \
  EMO_ASSIGN_OR_RETURN_IMPL(EMO_STATUS_CONCAT(emo_result_, __LINE__), lhs, expr)
#define EMO_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()
