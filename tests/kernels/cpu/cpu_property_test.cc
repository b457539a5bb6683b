// Seeded property test, per score type: >= 100,000 rows of mixed widths,
// distributions, K and options; every output through the verifier, every
// tenth chunk also equal to the reference in deterministic mode.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "selector_test_util.h"

namespace topk::testing {
namespace {

uint64_t Next(uint64_t& state) {
  state = state * 6364136223846793005ull + 1442695040888963407ull;
  return state >> 17;
}

class CpuPropertyTest : public ::testing::TestWithParam<ScoreType> {};

TEST_P(CpuPropertyTest, HundredThousandRowsAgainstVerifierAndReference) {
  const ScoreType dtype = GetParam();
  CpuSelector selector(CpuSelectorConfig{.threads = 2});
  uint64_t state = 20261129;
  const int32_t ks[] = {1, 3, 16, 100, 256, 1000, 2048, 3000};
  int64_t rows = 0;
  int64_t chunk = 0;
  while (rows < 100000) {
    // Mostly short and medium rows, a few long ones: fast, yet every path runs.
    const uint64_t kind = Next(state) % 100;
    GeneratorSpec spec;
    if (kind < 80) {
      spec.rows = 1000;
      spec.width = 1 + Next(state) % 2048;
    } else if (kind < 98) {
      spec.rows = 40;
      spec.width = 8192 + Next(state) % 32768;
    } else {
      spec.rows = 3;
      spec.width = 65536 + Next(state) % 200000;
    }
    spec.distribution = kAllDistributions[Next(state) % std::size(kAllDistributions)];
    spec.lengths = static_cast<LengthPattern>(Next(state) % 4);
    spec.k = ks[Next(state) % std::size(ks)];
    spec.layout = Next(state) % 2 ? Layout::kPacked : Layout::kPitched;
    spec.seed = Next(state);
    spec.dtype = dtype;
    const SelectOptions options{.sorted = Next(state) % 4 == 0,
                                .deterministic = Next(state) % 2 == 0};
    const ScoreMatrix m = Generate(spec);
    const Selection got = RunSelector(selector, m.batch(), spec.k, options);
    ASSERT_TRUE(got.status.ok()) << got.status;
    const absl::Status v =
        VerifySelection(m.batch(), spec.k, options, got.indices.data(), got.row_status.data());
    ASSERT_TRUE(v.ok()) << ScoreTypeName(dtype) << " chunk " << chunk << " "
                        << DistributionName(spec.distribution) << " width " << spec.width << " k "
                        << spec.k << ": " << v;
    if (chunk % 10 == 0 && options.deterministic) {
      ASSERT_EQ(got.indices, RunReference(m.batch(), spec.k, options).indices) << chunk;
    }
    rows += spec.rows;
    ++chunk;
  }
  EXPECT_GE(rows, 100000);
}

INSTANTIATE_TEST_SUITE_P(Types, CpuPropertyTest, ::testing::ValuesIn(kAllScoreTypes),
                         [](const ::testing::TestParamInfo<ScoreType>& info) {
                           return std::string(ScoreTypeName(info.param));
                         });

}  // namespace
}  // namespace topk::testing
