#include "service/file_transfer.h"

#include <algorithm>

namespace sandcastle::service {

Result<ByteBudget::Lease> reserve_transfer(ByteBudget& budget, std::uint64_t data_bytes, std::uint64_t copies) {
  if (data_bytes <= kUnreservedBytes) return ByteBudget::Lease{};
  auto lease = budget.reserve(data_bytes * copies, kBudgetWait);
  if (!lease)
    return Error::make(ErrorCode::kResourceExhausted,
                       "the server is busy moving other large files (" +
                           std::to_string(budget.used() >> 20) + " of " +
                           std::to_string(budget.total() >> 20) +
                           " MiB in flight); retry shortly, or move the file in smaller parts");
  return std::move(*lease);
}

Result<BoundedRead> read_bounded(sandbox::Sandbox& sb, ByteBudget& budget, const std::string& path,
                                 std::uint64_t offset, std::optional<std::uint64_t> length, std::uint64_t cap,
                                 std::uint64_t copies) {
  const std::uint64_t want = std::min(length.value_or(cap), cap);
  BoundedRead out;
  // Small files (the common case) in one call, with no reservation.
  auto first =
      sb.read_file(path, sandbox::ReadRange{offset, std::min(want, kUnreservedBytes), true});
  if (!first.ok()) return first.take_error();
  if (!first->too_large || (want <= kUnreservedBytes && !length)) {
    out.file = std::move(*first);  // all of it, or (above a small cap) too_large
    return out;
  }
  if (want <= kUnreservedBytes) {
    // A small range of a larger file.
    auto part = sb.read_file(path, sandbox::ReadRange{offset, want, false});
    if (!part.ok()) return part.take_error();
    out.file = std::move(*part);
    return out;
  }
  const std::uint64_t rest = first->size > offset ? first->size - offset : 0;
  if (!length && rest > cap) {
    out.file = std::move(*first);  // too_large, no data
    return out;
  }
  const std::uint64_t need = std::min(rest, want);
  auto lease = reserve_transfer(budget, need, copies);
  if (!lease.ok()) return lease.take_error();
  out.lease = std::move(*lease);
  auto data = sb.read_file(path, sandbox::ReadRange{offset, need, false});
  if (!data.ok()) return data.take_error();
  if (!length && data->size > first->size && data->size - offset > need)
    return Error::make(ErrorCode::kUnavailable, path + " grew while it was read; read it again");
  out.file = std::move(*data);
  return out;
}

}  // namespace sandcastle::service
