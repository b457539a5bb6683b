// The CUDA backend's route statistics as one list: the kernels' counter
// enum, the workspace slots, the public CudaRouteStats fields and their
// names are all generated from TOPK_CUDA_ROUTE_STATS, so adding a counter is
// one line here. Host-only (no CUDA headers).
#pragma once

// X(field, enumerator): field of CudaRouteStats, kernel-side Stat enumerator.
// The order is the order of the counters in the workspace.
#define TOPK_CUDA_ROUTE_STATS(X)                                               \
  /* rows with L > K and no NaN / bad length */                                \
  X(rows, kRows)                                                               \
  /* rows whose strided view was usable (the proposal ran to a cutoff) */      \
  X(sampled, kSampled)                                                         \
  /* rows certified by tau0 */                                                 \
  X(certified, kCertified)                                                     \
  /* rows that needed the tau1 band */                                         \
  X(band_rescued, kBandRescued)                                                \
  /* sampled rows that fell back to exact coarse recovery */                   \
  X(exact_recovery, kExactRecovery)                                            \
  /* rows that took the exact route (any reason) */                            \
  X(exact_rows, kExactRows)                                                    \
  /* sum of certified candidate counts */                                      \
  X(candidates, kCandidates)                                                   \
  /* refinement levels done by re-scanning the row */                          \
  X(rescans, kRescans)                                                         \
  /* SM clock cycles summed over rows (one thread's view between barriers): */ \
  /* view histogram, boundaries, cutoffs */                                    \
  X(cycles_proposal, kCyclesProposal)                                          \
  /* certification pass(es), band, exact recovery */                           \
  X(cycles_admit, kCyclesAdmit)                                                \
  /* radix refinement of the candidates */                                     \
  X(cycles_refine, kCyclesRefine)                                              \
  /* output (sort, write) */                                                   \
  X(cycles_finalize, kCyclesFinalize)                                          \
  /* rows the short-row route served (one CTA per row, no sampling) */         \
  X(short_rows, kShortRows)                                                    \
  /* rows a whole cluster served (the cluster route, not its one-CTA rows) */  \
  X(cluster_rows, kClusterRows)                                                \
  /* rows the resident decode route served (the row kept on chip) */           \
  X(resident_rows, kResidentRows)                                              \
  /* the resident route's steps, rank 0's clock summed over rows (they */      \
  /* split cycles_proposal and cycles_admit): its own load of keys and */      \
  /* the coarse histogram, */                                                  \
  X(cycles_resident_load, kCyclesResidentLoad)                                 \
  /* the barrier after it (the cluster's slowest load), */                     \
  X(cycles_resident_load_wait, kCyclesResidentLoadWait)                        \
  /* the histogram exchange and its barrier, */                                \
  X(cycles_resident_exchange, kCyclesResidentExchange)                         \
  /* the boundary search, cutoffs and the on-chip split, */                    \
  X(cycles_resident_boundary, kCyclesResidentBoundary)                         \
  /* the gather (reservations, committed indices, frontier to rank 0), */      \
  X(cycles_resident_gather, kCyclesResidentGather)                             \
  /* and the barrier that closes it (the cluster's slowest gather) */          \
  X(cycles_resident_gather_wait, kCyclesResidentGatherWait)
