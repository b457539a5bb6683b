#include "server/engine/channel_block.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace topk::server {
namespace {

std::string RandomName() {
  std::random_device device;
  std::string name = "/topk-ch-";
  for (int i = 0; i < 4; ++i) absl::StrAppendFormat(&name, "%08x", device());
  return name;
}

absl::Status OsError(absl::string_view what, const std::string& name) {
  return absl::InternalError(
      absl::StrCat("channel control block ", name, ": ", what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChannelBlock>> ChannelBlock::Create() {
  const std::string name = RandomName();
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return OsError("shm_open", name);
  if (ftruncate(fd, TOPK_CHANNEL_CONTROL_BYTES) != 0) {
    absl::Status error = OsError("ftruncate", name);
    close(fd);
    shm_unlink(name.c_str());
    return error;
  }
  void* mapped =
      mmap(nullptr, TOPK_CHANNEL_CONTROL_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) {
    absl::Status error = OsError("mmap", name);
    shm_unlink(name.c_str());
    return error;
  }
  std::memset(mapped, 0, TOPK_CHANNEL_CONTROL_BYTES);
  return std::unique_ptr<ChannelBlock>(
      new ChannelBlock(name, static_cast<topk_channel_control*>(mapped)));
}

ChannelBlock::~ChannelBlock() {
  munmap(control_, TOPK_CHANNEL_CONTROL_BYTES);
  shm_unlink(name_.c_str());
}

}  // namespace topk::server
