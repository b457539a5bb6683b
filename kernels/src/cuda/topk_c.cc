// C ABI over CudaSelector (kernels/include/topk/topk_c.h).
#include "topk/topk_c.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "topk/cuda_selector.h"

struct topk_plan {
  std::unique_ptr<topk::CudaSelector> selector;
  topk::Plan plan;
  std::string explain;
};

namespace {

thread_local std::string g_last_error;

int Fail(const absl::Status& s) {
  g_last_error = s.ToString();
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return TOPK_ERROR_INVALID_ARGUMENT;
    case absl::StatusCode::kFailedPrecondition:
      return TOPK_ERROR_NO_DEVICE;
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kResourceExhausted:
      return TOPK_ERROR_DEVICE;
    case absl::StatusCode::kUnimplemented:
      return TOPK_ERROR_UNIMPLEMENTED;
    default:
      return TOPK_ERROR_INTERNAL;
  }
}

}  // namespace

extern "C" {

int topk_api_version(void) { return TOPK_C_API_VERSION; }

int topk_plan_create(int device, int32_t k, int64_t max_rows, int64_t max_width, int layout,
                     unsigned options, topk_plan** plan) {
  return topk_plan_create_v2(device, k, max_rows, max_width, layout, TOPK_DTYPE_FP32, options,
                             plan);
}

int topk_plan_create_v2(int device, int32_t k, int64_t max_rows, int64_t max_width, int layout,
                        int dtype, unsigned options, topk_plan** plan) {
  if (plan == nullptr) return Fail(absl::InvalidArgumentError("plan: null pointer"));
  *plan = nullptr;
  if (layout != TOPK_LAYOUT_PITCHED && layout != TOPK_LAYOUT_PACKED) {
    return Fail(absl::InvalidArgumentError("layout: 0 (pitched) or 1 (packed)"));
  }
  if (dtype != TOPK_DTYPE_FP32 && dtype != TOPK_DTYPE_BF16 && dtype != TOPK_DTYPE_FP16) {
    // Before any device work: the same answer on a machine without a GPU.
    return Fail(absl::InvalidArgumentError("dtype: 0 (fp32), 1 (bf16) or 2 (fp16)"));
  }
  topk::CudaSelectorConfig config;
  config.device = device;
  config.enable_sampling = (options & TOPK_OPT_NO_SAMPLING) == 0;
  auto selector = topk::CudaSelector::Create(config);
  if (!selector.ok()) return Fail(selector.status());
  topk::SelectOptions opts;
  opts.sorted = (options & TOPK_OPT_SORTED) != 0;
  opts.deterministic = (options & TOPK_OPT_DETERMINISTIC) != 0;
  auto p = (*selector)->MakePlan(
      topk::ProblemShape{k, max_rows, max_width, static_cast<topk::Layout>(layout),
                         static_cast<topk::ScoreType>(dtype)},
      opts);
  if (!p.ok()) return Fail(p.status());
  auto result = std::make_unique<topk_plan>();
  result->selector = std::move(*selector);
  result->plan = *p;
  result->explain = p->Explain();
  *plan = result.release();
  return TOPK_OK;
}

void topk_plan_destroy(topk_plan* plan) { delete plan; }

size_t topk_plan_workspace_bytes(const topk_plan* plan) {
  return plan == nullptr ? 0 : plan->plan.workspace_bytes;
}

const char* topk_plan_explain(const topk_plan* plan) {
  return plan == nullptr ? "" : plan->explain.c_str();
}

int topk_select(const topk_plan* plan, const float* scores, int64_t pitch,
                const int64_t* row_offsets, const int32_t* lengths, int64_t num_rows, int64_t width,
                int32_t* indices, uint8_t* row_status, void* workspace, size_t workspace_bytes,
                void* stream) {
  return topk_select_v2(plan, scores, pitch, row_offsets, lengths, num_rows, width, indices,
                        row_status, workspace, workspace_bytes, stream);
}

int topk_select_v2(const topk_plan* plan, const void* scores, int64_t pitch,
                   const int64_t* row_offsets, const int32_t* lengths, int64_t num_rows,
                   int64_t width, int32_t* indices, uint8_t* row_status, void* workspace,
                   size_t workspace_bytes, void* stream) {
  if (plan == nullptr) return Fail(absl::InvalidArgumentError("plan: null pointer"));
  topk::RowBatch batch;
  batch.dtype = plan->plan.shape.dtype;
  if (batch.dtype == topk::ScoreType::kFloat32) {
    batch.scores = static_cast<const float*>(scores);
  } else {
    batch.scores16 = static_cast<const uint16_t*>(scores);
  }
  batch.layout = plan->plan.shape.layout;
  batch.pitch = pitch;
  batch.row_offsets = row_offsets;
  batch.lengths = lengths;
  batch.num_rows = num_rows;
  batch.width = width;
  topk::OutputView out{indices, reinterpret_cast<topk::RowStatus*>(row_status)};
  topk::RunContext ctx{workspace, workspace_bytes, stream};
  const absl::Status s = plan->selector->Run(plan->plan, batch, out, ctx);
  if (!s.ok()) return Fail(s);
  return TOPK_OK;
}

const char* topk_last_error(void) { return g_last_error.c_str(); }

}  // extern "C"
