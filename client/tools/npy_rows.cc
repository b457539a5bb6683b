#include "npy_rows.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace topk::tools {
namespace {

// One array as read: its dtype descriptor ("<f4"), shape and raw data.
struct NpyArray {
  std::string descr;
  std::vector<int64_t> shape;
  std::string data;

  int64_t elements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

// The value of `key` in the header's Python dict literal, up to the next
// top-level comma ("'<f4'", "False", "(4, 100)").
absl::StatusOr<std::string> HeaderValue(absl::string_view header, absl::string_view key,
                                        const std::string& path) {
  const size_t at = header.find(absl::StrCat("'", key, "'"));
  if (at == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": .npy header has no '", key, "'"));
  }
  size_t begin = header.find(':', at);
  if (begin == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": bad .npy header"));
  }
  ++begin;
  int depth = 0;
  size_t end = begin;
  for (; end < header.size(); ++end) {
    const char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if ((c == ',' && depth == 0) || c == '}') break;
  }
  return std::string(absl::StripAsciiWhitespace(header.substr(begin, end - begin)));
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr absl::string_view kMagic("\x93NUMPY", 6);
  if (bytes.size() < 10 || absl::string_view(bytes).substr(0, 6) != kMagic) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a .npy file"));
  }
  const int major = static_cast<unsigned char>(bytes[6]);
  // Version 1 has a 2-byte header length, versions 2 and 3 a 4-byte one
  // (both little-endian).
  size_t header_len = 0, header_at = 0;
  if (major == 1) {
    header_len = static_cast<unsigned char>(bytes[8]) | static_cast<unsigned char>(bytes[9]) << 8;
    header_at = 10;
  } else if ((major == 2 || major == 3) && bytes.size() >= 12) {
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + 8, 4);
    header_len = len;
    header_at = 12;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(path, ": .npy version ", major, " unknown"));
  }
  if (header_at + header_len > bytes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": .npy header runs past the file"));
  }
  const absl::string_view header = absl::string_view(bytes).substr(header_at, header_len);
  absl::StatusOr<std::string> descr = HeaderValue(header, "descr", path);
  absl::StatusOr<std::string> fortran = HeaderValue(header, "fortran_order", path);
  absl::StatusOr<std::string> shape = HeaderValue(header, "shape", path);
  if (!descr.ok()) return descr.status();
  if (!fortran.ok()) return fortran.status();
  if (!shape.ok()) return shape.status();
  if (*fortran != "False") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": Fortran-order array; save a C-order one (np.ascontiguousarray)"));
  }
  NpyArray array;
  array.descr = absl::StrCat(absl::StripSuffix(absl::StripPrefix(*descr, "'"), "'"));
  for (absl::string_view dim : absl::StrSplit(
           absl::StripSuffix(absl::StripPrefix(*shape, "("), ")"), ',', absl::SkipWhitespace())) {
    int64_t d = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(dim), &d) || d < 0) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad shape ", *shape));
    }
    array.shape.push_back(d);
  }
  array.data = bytes.substr(header_at + header_len);
  return array;
}

}  // namespace

absl::StatusOr<PackedRows> LoadNpyRows(const std::string& scores_path,
                                       const std::string& lengths_path) {
  absl::StatusOr<NpyArray> scores = ReadNpy(scores_path);
  if (!scores.ok()) return scores.status();
  if (scores->descr != "<f4") {
    return absl::InvalidArgumentError(absl::StrCat(scores_path, ": dtype ", scores->descr,
                                                   "; scores must be little-endian float32 (<f4)"));
  }
  if (scores->shape.size() == 1) scores->shape.insert(scores->shape.begin(), 1);
  if (scores->shape.size() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(scores_path, ": ", scores->shape.size(), "-D array; rows need 1-D or 2-D"));
  }
  const int64_t rows = scores->shape[0], width = scores->shape[1];
  if (static_cast<int64_t>(scores->data.size()) < scores->elements() * 4) {
    return absl::InvalidArgumentError(absl::StrCat(scores_path, ": data shorter than its shape"));
  }
  std::vector<int32_t> lengths(rows, static_cast<int32_t>(width));
  if (!lengths_path.empty()) {
    absl::StatusOr<NpyArray> given = ReadNpy(lengths_path);
    if (!given.ok()) return given.status();
    const bool int32 = given->descr == "<i4", int64 = given->descr == "<i8";
    if ((!int32 && !int64) || given->shape.size() != 1 || given->shape[0] != rows ||
        static_cast<int64_t>(given->data.size()) < rows * (int32 ? 4 : 8)) {
      return absl::InvalidArgumentError(absl::StrCat(
          lengths_path, ": lengths must be ", rows, " int32 or int64 values (shape (", rows,
          ",)), got ", given->descr, " of ", given->shape.size(), " dimensions"));
    }
    for (int64_t r = 0; r < rows; ++r) {
      int64_t length = 0;
      if (int32) {
        int32_t value = 0;
        std::memcpy(&value, given->data.data() + r * 4, 4);
        length = value;
      } else {
        std::memcpy(&length, given->data.data() + r * 8, 8);
      }
      if (length < 0 || length > width) {
        return absl::InvalidArgumentError(absl::StrCat(lengths_path, ": row ", r, " length ",
                                                       length, " outside [0, ", width, "]"));
      }
      lengths[r] = static_cast<int32_t>(length);
    }
  }
  std::vector<float> packed;
  for (int64_t r = 0; r < rows; ++r) {
    const size_t at = packed.size();
    packed.resize(at + lengths[r]);
    std::memcpy(packed.data() + at, scores->data.data() + r * width * 4,
                static_cast<size_t>(lengths[r]) * 4);
  }
  return FromLengths(std::move(packed), std::move(lengths));
}

}  // namespace topk::tools
