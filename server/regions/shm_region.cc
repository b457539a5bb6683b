#include "server/regions/shm_region.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "openssl/evp.h"
#include "server/regions/shm_guard.h"

namespace topk::server {
namespace {

std::string OsError(int error) { return std::strerror(error); }

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(Fd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// An mmap'd window of a shared-memory object, guarded against SIGBUS;
// unmapped on destruction. It keeps the object open to see its size change
// (CheckIntact).
class ShmRegion final : public Region {
 public:
  ShmRegion(Fd fd, void* mapping, size_t mapping_bytes, size_t usable_offset, uint64_t byte_size,
            uint64_t needed_object_bytes, ShmGuard guard, MemoryPlace place)
      : Region(RegionKind::kShm, static_cast<std::byte*>(mapping) + usable_offset, byte_size, -1),
        place_(place),
        fd_(std::move(fd)),
        mapping_(mapping),
        mapping_bytes_(mapping_bytes),
        needed_object_bytes_(needed_object_bytes),
        guard_(std::move(guard)) {}
  ~ShmRegion() override {
    guard_ = ShmGuard();  // unguarded before the address range can be reused
    munmap(mapping_, mapping_bytes_);
  }

  bool poisoned() const override { return guard_.poisoned(); }
  MemoryPlace place() const override { return place_; }
  absl::Status CopyOut(uint64_t offset, size_t bytes, void* dest) const override {
    if (bytes > 0) std::memcpy(dest, data() + offset, bytes);
    return absl::OkStatus();
  }

  absl::Status CheckIntact() const override {
    if (guard_.poisoned()) {
      return absl::FailedPreconditionError(
          "poisoned: a request faulted reading it after the shared-memory object shrank; "
          "unregister it (and register it again once the object has its size back)");
    }
    struct stat info {};
    if (fstat(fd_.get(), &info) != 0 ||
        static_cast<uint64_t>(info.st_size) < needed_object_bytes_) {
      return absl::FailedPreconditionError(
          absl::StrCat("the shared-memory object shrank below the registered range (",
                       needed_object_bytes_, " bytes); unregister and register it again"));
    }
    return absl::OkStatus();
  }

 private:
  MemoryPlace place_;
  Fd fd_;
  void* mapping_;
  size_t mapping_bytes_;
  uint64_t needed_object_bytes_;
  ShmGuard guard_;
};

}  // namespace

int64_t ShmProofOffset(uint64_t offset, uint64_t object_bytes) {
  if (object_bytes < kShmProofBytes) return -1;
  if (offset <= object_bytes - kShmProofBytes) return static_cast<int64_t>(offset);
  return static_cast<int64_t>(object_bytes - kShmProofBytes);
}

std::string ShmOwnershipProof(absl::string_view session_id) {
  std::string input = "topk-shm-ownership";
  input.push_back('\0');
  input.append(session_id.data(), session_id.size());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(input.data(), input.size(), digest, &length, EVP_sha256(), nullptr) != 1) {
    return std::string();  // matches nothing: every registration is refused
  }
  return std::string(reinterpret_cast<const char*>(digest), kShmProofBytes);
}

absl::StatusOr<std::unique_ptr<Region>> OpenShmRegion(const std::string& shm_name, uint64_t offset,
                                                      uint64_t byte_size,
                                                      absl::string_view ownership_proof) {
  // A name with a second '/' would address a path, not a shared-memory
  // object; an empty one or a bare "/" addresses nothing; "/." and "/.."
  // name directories. shm_open() stops at a NUL byte, so "/obj\0cd" would
  // open (and a Select write into) "/obj": refused, and the message shows
  // the name escaped, the NUL as "\x00", rather than cut where C would cut it.
  if (shm_name.size() < 2 || shm_name.size() > 255 || shm_name[0] != '/' ||
      shm_name.find('/', 1) != std::string::npos || shm_name == "/." || shm_name == "/..") {
    return absl::InvalidArgumentError(absl::StrCat("shm.shm_name: '", absl::CHexEscape(shm_name),
                                                   "' is not a shared-memory name (\"/name\", no "
                                                   "other '/', not \".\" or \"..\")"));
  }
  if (shm_name.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm.shm_name: '", absl::CHexEscape(shm_name), "' holds a NUL byte at ",
                     shm_name.find('\0'), " (a shared-memory name ends at the first NUL)"));
  }
  if (byte_size == 0) {
    return absl::InvalidArgumentError("shm.byte_size: must be > 0");
  }
  if (offset > std::numeric_limits<uint64_t>::max() - byte_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm: offset ", offset, " + byte_size ", byte_size, " overflows"));
  }
  Fd fd(shm_open(shm_name.c_str(), O_RDWR, 0));
  if (fd.get() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm.shm_name: shm_open('", shm_name, "'): ", OsError(errno)));
  }
  struct stat info {};
  if (fstat(fd.get(), &info) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm.shm_name: fstat('", shm_name, "'): ", OsError(errno)));
  }
  const auto object_bytes = static_cast<uint64_t>(info.st_size);
  // The object itself, not its name: a second registration (under any name
  // that reaches it) is the same memory.
  const MemoryPlace place{
      .object = {static_cast<uint64_t>(info.st_dev), static_cast<uint64_t>(info.st_ino)},
      .start = offset};
  if (offset + byte_size > object_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm: offset ", offset, " + byte_size ", byte_size, " = ", offset + byte_size,
                     " exceeds the object's ", object_bytes, " bytes ('", shm_name, "')"));
  }
  // Before anything is mapped: the client must have written the proof.
  const int64_t proof_at = ShmProofOffset(offset, object_bytes);
  if (proof_at < 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "shm: '", shm_name, "' (", object_bytes, " bytes) is smaller than the ", kShmProofBytes,
        "-byte ownership proof it must hold (docs/regions.md, "
        "Trust model)"));
  }
  char held[kShmProofBytes] = {};
  if (ownership_proof.size() != kShmProofBytes ||
      pread(fd.get(), held, kShmProofBytes, static_cast<off_t>(proof_at)) !=
          static_cast<ssize_t>(kShmProofBytes) ||
      std::memcmp(held, ownership_proof.data(), kShmProofBytes) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(
        "shm: '", shm_name, "' does not hold this session's ownership proof at bytes [", proof_at,
        ", ", proof_at + kShmProofBytes,
        ") of the object: the registering process must write it there first (the clients do), "
        "which only a process that can write the object can (docs/regions.md, Trust model)"));
  }
  // mmap wants a page-aligned file offset: map from the page holding
  // `offset` and point past the difference.
  const auto page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t map_offset = offset - offset % page;
  const uint64_t lead = offset - map_offset;
  const uint64_t map_bytes = lead + byte_size;
  if (map_bytes > std::numeric_limits<size_t>::max()) {
    return absl::InvalidArgumentError("shm.byte_size: larger than the address space");
  }
  void* mapping = mmap(nullptr, static_cast<size_t>(map_bytes), PROT_READ | PROT_WRITE, MAP_SHARED,
                       fd.get(), static_cast<off_t>(map_offset));
  if (mapping == MAP_FAILED) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm: mmap('", shm_name, "', ", map_bytes, " bytes): ", OsError(errno)));
  }
  absl::StatusOr<ShmGuard> guard = ShmGuard::Guard(mapping, static_cast<size_t>(map_bytes));
  if (!guard.ok()) {
    munmap(mapping, static_cast<size_t>(map_bytes));
    return guard.status();
  }
  return std::make_unique<ShmRegion>(std::move(fd), mapping, static_cast<size_t>(map_bytes),
                                     static_cast<size_t>(lead), byte_size, offset + byte_size,
                                     *std::move(guard), place);
}

}  // namespace topk::server
