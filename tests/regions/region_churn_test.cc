// The region protocol under fuzz and churn: a seeded random walk over a few
// client "actors" (each with its own session, segments and registrations)
// of OpenSession, Register (valid ranges, and invalid ones that must be
// refused), Select by reference (random valid layouts answered exactly, and
// invalid references refused without a byte written), Unregister (one or
// all) and session death (the RegionSession destroyed, as a client dying
// does; sometimes with a request of the session in flight). After every step
// the model of what each actor holds is checked against the server:
//   * ListRegions names what the actor registered (names, sizes), none in
//     flight once the actor is idle;
//   * the server maps each segment exactly once per registration of it that
//     is alive (this process's /proc/self/maps: the server runs in-process),
//     so every mapping is gone once its registration or session ends and
//     its requests are done;
//   * every segment holds exactly what the test wrote and the answers it
//     asked for: a valid Select writes its K cells per output row and
//     nothing else (the sentinels past K intact), a refused one nothing, and
//     no session touches another's memory (the same name in two sessions is
//     two regions: each answer is exact for the actor's own rows);
//   * an ended session is gone (ListRegions, Select and Register: NOT_FOUND).
// TOPK_CHURN_SECONDS (default 60) bounds the walk, TOPK_CHURN_SEED replays one.
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "churn.h"
#include "gtest/gtest.h"

namespace topk::server::test::churn {
namespace {

double ChurnSeconds() {
  const char* text = std::getenv("TOPK_CHURN_SECONDS");
  return text != nullptr && *text != '\0' ? std::atof(text) : 60.0;
}

uint64_t ChurnSeed() {
  const char* text = std::getenv("TOPK_CHURN_SEED");
  if (text != nullptr && *text != '\0') return std::strtoull(text, nullptr, 10);
  return std::random_device{}();
}

TEST(RegionChurn, RandomSessionsRegistrationsAndSelectsKeepTheInvariants) {
  const uint64_t seed = ChurnSeed();
  const double seconds = ChurnSeconds();
  std::cout << "region churn: seed " << seed << " (TOPK_CHURN_SEED), " << seconds
            << " s (TOPK_CHURN_SECONDS)\n";
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  SCOPED_TRACE(absl::StrCat("TOPK_CHURN_SEED=", seed));
  Churn churn(seed);
  ASSERT_TRUE(churn.started());
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(seconds);
  int64_t steps = 0;
  while (absl::Now() < end) {
    SCOPED_TRACE(absl::StrCat("step ", steps));
    churn.Step();
    if (HasFatalFailure()) break;
    churn.Check();
    if (HasFatalFailure()) break;
    ++steps;
  }
  const int64_t failed_at = HasFatalFailure() ? steps : -1;
  if (failed_at < 0) churn.Finish();
  churn.Report(steps, absl::ToDoubleSeconds(absl::Now() - start));
  ASSERT_LT(failed_at, 0) << "failed at step " << failed_at << " of seed " << seed;
  // Every kind of action ran (a minute covers thousands of steps).
  for (const char* kind : {"open",
                           "register: whole segment",
                           "register: rows only",
                           "register: window",
                           "register refused: past the object",
                           "register refused: empty range",
                           "register refused: offset + size wraps",
                           "register refused: no ownership proof",
                           "register refused: name taken",
                           "register refused: ended or unknown session",
                           "register refused: no such object",
                           "select: answer inline",
                           "select: indices by reference",
                           "select: indices and values by reference",
                           "select refused: offset past the region",
                           "select refused: another session's region",
                           "select refused: unregistered region",
                           "select refused: output over its rows",
                           "select refused: output past the region",
                           "select refused: ended session",
                           "unregister: one",
                           "unregister: all",
                           "unregister refused: not registered",
                           "end session: idle",
                           "end session: a request in flight"}) {
    EXPECT_TRUE(churn.counts().contains(kind)) << "no step did " << kind;
  }
}

}  // namespace
}  // namespace topk::server::test::churn
