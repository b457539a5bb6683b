// The saturation signal (server/engine/busy_window.h) as a pure function of
// the batches reported: workers busy without a pause read 1, half the time
// 0.5, a busy device left idle decays by 1/e per time constant, and the
// fraction is the mean over the device's workers.
#include "server/engine/busy_window.h"

#include <cmath>

#include "gtest/gtest.h"

namespace topk::server {
namespace {

constexpr int64_t kMs = 1000;
constexpr int64_t kStart = 1'000'000'000;  // any steady-clock time

// `workers` workers each serving batches of busy_ms with idle_ms between
// them, for `seconds`; returns the end time.
int64_t Serve(BusyWindow& window, int workers, int64_t busy_ms, int64_t idle_ms, int seconds) {
  int64_t now = kStart;
  while (now < kStart + seconds * 1000 * kMs) {
    for (int w = 0; w < workers; ++w) window.AddBusy(now, now + busy_ms * kMs);
    now += (busy_ms + idle_ms) * kMs;
  }
  return now;
}

TEST(BusyWindow, AlwaysBusyReadsOne) {
  BusyWindow window;
  const int64_t end = Serve(window, 2, 3, 0, 60);
  EXPECT_NEAR(window.Fraction(end, 2), 1.0, 0.01);
  EXPECT_EQ(window.total_busy_us(), 2 * (end - kStart));
}

TEST(BusyWindow, HalfBusyReadsOneHalf) {
  BusyWindow window;
  const int64_t end = Serve(window, 4, 2, 2, 60);
  EXPECT_NEAR(window.Fraction(end, 4), 0.5, 0.02);
}

TEST(BusyWindow, OneOfTwoWorkersBusyReadsOneHalf) {
  BusyWindow window;
  const int64_t end = Serve(window, 1, 5, 0, 60);
  EXPECT_NEAR(window.Fraction(end, 2), 0.5, 0.01);
}

TEST(BusyWindow, IdleDecaysByTheTimeConstant) {
  BusyWindow window;
  const int64_t end = Serve(window, 1, 1, 0, 60);
  const double busy = window.Fraction(end, 1);
  const auto tau = static_cast<int64_t>(BusyWindow::kTimeConstantUs);
  EXPECT_NEAR(window.Fraction(end + tau, 1), busy / std::exp(1.0), 0.01);
  EXPECT_LT(window.Fraction(end + 5 * tau, 1), 0.01);
  // A ramp from idle: after one time constant fully busy, 1 - 1/e.
  BusyWindow fresh;
  const int64_t ramp_end = Serve(fresh, 1, 1, 0, 10);
  EXPECT_NEAR(fresh.Fraction(ramp_end, 1), 1 - 1 / std::exp(1.0), 0.01);
  EXPECT_EQ(BusyWindow().Fraction(kStart, 4), 0.0);
}

}  // namespace
}  // namespace topk::server
