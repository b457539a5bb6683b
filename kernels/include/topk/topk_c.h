/* C ABI of the CUDA selector (libtopk_c.so). Small and stable: a plan per
 * shape bucket, its workspace size, and a run on raw device pointers and a
 * cudaStream_t. Every function returns TOPK_OK or an error code; the message
 * of the last error on the calling thread is topk_last_error(). */
#ifndef TOPK_TOPK_C_H_
#define TOPK_TOPK_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* 2: score types (topk_plan_create_v2, topk_select_v2). Version 1 callers
 * keep working unchanged: their plans are FP32. */
#define TOPK_C_API_VERSION 2

typedef enum {
  TOPK_OK = 0,
  TOPK_ERROR_INVALID_ARGUMENT = 1,
  TOPK_ERROR_NO_DEVICE = 2,
  TOPK_ERROR_DEVICE = 3,
  TOPK_ERROR_INTERNAL = 4,
  TOPK_ERROR_UNIMPLEMENTED = 5 /* e.g. a score type the CUDA kernels do not serve yet */
} topk_status;

typedef enum { TOPK_LAYOUT_PITCHED = 0, TOPK_LAYOUT_PACKED = 1 } topk_layout;

/* Element type of the scores (the values of topk::ScoreType). */
typedef enum { TOPK_DTYPE_FP32 = 0, TOPK_DTYPE_BF16 = 1, TOPK_DTYPE_FP16 = 2 } topk_dtype;

/* Option bits. */
#define TOPK_OPT_SORTED 1u        /* value descending, ties by index */
#define TOPK_OPT_DETERMINISTIC 2u /* ties to smallest indices, bit-identical */
#define TOPK_OPT_NO_SAMPLING 4u   /* exact coarse recovery for every row */

/* Row status codes written to row_status (one byte per row, optional). */
#define TOPK_ROW_OK 0
#define TOPK_ROW_NAN 1
#define TOPK_ROW_BAD_LENGTH 2

typedef struct topk_plan topk_plan;

int topk_api_version(void);

/* Plans a shape bucket: any live rows <= max_rows, any length <= max_width;
 * FP32 scores. */
int topk_plan_create(int device, int32_t k, int64_t max_rows, int64_t max_width, int layout,
                     unsigned options, topk_plan** plan);
/* The same for scores of type `dtype` (a topk_dtype): FP32, BF16 and FP16,
 * every route; a value that is no topk_dtype is TOPK_ERROR_INVALID_ARGUMENT. */
int topk_plan_create_v2(int device, int32_t k, int64_t max_rows, int64_t max_width, int layout,
                        int dtype, unsigned options, topk_plan** plan);
void topk_plan_destroy(topk_plan* plan);
size_t topk_plan_workspace_bytes(const topk_plan* plan);
/* One line: route, stride, grid, workspace. Valid until topk_plan_destroy. */
const char* topk_plan_explain(const topk_plan* plan);

/* Selects the top-k of every row. All pointers are device pointers except
 * stream (a cudaStream_t, NULL for the legacy default stream). Pitched rows:
 * row r at scores + r * pitch (row_offsets NULL); packed: scores +
 * row_offsets[r]. indices: num_rows x k int32. Asynchronous. */
int topk_select(const topk_plan* plan, const float* scores, int64_t pitch,
                const int64_t* row_offsets, const int32_t* lengths, int64_t num_rows, int64_t width,
                int32_t* indices, uint8_t* row_status, void* workspace, size_t workspace_bytes,
                void* stream);
/* The same for a plan of any dtype: scores points at elements of the plan's
 * type (2-byte aligned for the 16-bit types); pitch and row_offsets count
 * elements. */
int topk_select_v2(const topk_plan* plan, const void* scores, int64_t pitch,
                   const int64_t* row_offsets, const int32_t* lengths, int64_t num_rows,
                   int64_t width, int32_t* indices, uint8_t* row_status, void* workspace,
                   size_t workspace_bytes, void* stream);

/* Message of the last failed call on this thread ("" if none). */
const char* topk_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* TOPK_TOPK_C_H_ */
