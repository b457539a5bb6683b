// Which queued jobs a worker may serve together in one backend call (one
// launch on a GPU), and how much of the worker's buffers a batch uses.
//
// Jobs are compatible when one plan and one kind of backend call serve them
// all: the same K, options and return_values; rows of the same kind of
// source (host memory, or the same GPU), with lengths on the host for all or
// on the GPU for all (then with the same width bound, which the transport
// checked each job's rows against); and answers going to the same kind of
// place (the response, host regions, or GPU regions). A batch holds at most
// the limits' rows, and its host rows at most the staging's bytes.
#pragma once

#include <cstdint>

#include "server/backends/backend.h"
#include "server/engine/select_job.h"

namespace topk::server {

// What a batch takes of a worker's buffers so far.
struct BatchFootprint {
  int64_t jobs = 0;
  int64_t rows = 0;
  int64_t staged_bytes = 0;  // host rows, each source rounded up to whole floats
};

// Elements a job's source takes in a batch's element space (its bytes
// rounded up to whole floats, so the next source starts aligned).
int64_t SourceElements(const SelectInput& input);

// Host bytes the job's rows take in staging (0 for rows on a GPU). Every
// host row counts, also rows a CPU worker could read in place: a batch of
// several parts is copied whole when any one of them is not in place
// (StageParts), and a GPU worker copies them all. So a batch's host rows
// stay within max_batch_bytes, except a lone job's: rows by reference that
// a CPU worker reads in place may span more (the transport lets only those
// through, CheckRegionRowBytes); such a job takes no batch-mates.
int64_t StagedBytes(const SelectInput& input);

bool Compatible(const SelectInput& lead, const SelectInput& other);

// True when `other` is compatible with `lead` and fits beside `batch`
// within `limits` and `max_jobs`.
bool CanJoin(const SelectInput& lead, const SelectInput& other, const BatchFootprint& batch,
             const RequestLimits& limits, int64_t max_jobs);

void Add(const SelectInput& input, BatchFootprint& batch);

}  // namespace topk::server
