// A client process for the client-death test: opens a region session on
// --target, creates and registers the shared-memory segment --shm_name,
// prints the session id on stdout, then waits to be killed.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "topk/client/regions.h"

ABSL_FLAG(std::string, target, "", "the server's address");
ABSL_FLAG(std::string, shm_name, "", "the segment to create and register");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto client = topk::client::Client::Connect({.target = absl::GetFlag(FLAGS_target)});
  if (!client.ok()) return EXIT_FAILURE;
  auto session = topk::client::RegionSession::Open(**client);
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return EXIT_FAILURE;
  }
  auto segment = topk::client::SharedMemorySegment::Create(absl::GetFlag(FLAGS_shm_name), 1 << 16);
  if (!segment.ok() || !(*session)->Register("held", *segment).ok()) return EXIT_FAILURE;
  std::printf("%s\n", (*session)->id().c_str());
  std::fflush(stdout);
  for (;;) pause();
}
