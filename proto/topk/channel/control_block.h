/* The control block of a topk.v1 channel (OpenChannel): one page of POSIX
 * shared memory that the server creates and the client maps, so that a call
 * needs no RPC and no host round trip on the client's side.
 *
 * A call, as the client's CUDA stream (or, with shared-memory regions, its
 * host) makes it:
 *   1. write `desc` (the call's live M and where its rows, lengths and
 *      outputs are, as offsets into the channel's regions);
 *   2. write ready = 1;
 *   3. wait until done == 1;
 *   4. write done = 0.
 * Every value written or compared is a constant, so the four steps can be
 * captured in a CUDA graph and replayed (each a stream memory operation:
 * cuStreamBatchMemOp). The server sets ready = 0 when it takes the call,
 * checks the descriptor against the channel's regions and caps, selects,
 * writes `status`, then done = 1. A call the server refuses touches no
 * output; its status names the field (and the row) at fault.
 *
 * Both sides reach the block through host memory (the client registers its
 * mapping with cuMemHostRegister to write it from its stream), so either
 * side can always release the other's wait with a plain store: the server
 * never leaves a wait pending on its GPU for a client that stopped calling
 * (docs/channels.md says why), and a client whose server died can release
 * its own stream. Little-endian; plain C so that any client can include it.
 */
#ifndef TOPK_CHANNEL_CONTROL_BLOCK_H_
#define TOPK_CHANNEL_CONTROL_BLOCK_H_

#include <stdint.h>

#define TOPK_CHANNEL_LAYOUT_VERSION 1u
#define TOPK_CHANNEL_CONTROL_BYTES 4096u
/* The most regions one channel names (OpenChannelRequest.regions). */
#define TOPK_CHANNEL_MAX_REGIONS 8u
/* A descriptor's values_region when the call returns no values. */
#define TOPK_CHANNEL_NO_REGION 0xffffffffu

/* What a call's status word says. Every code but OK means the call wrote
 * nothing into its outputs. */
typedef enum {
  TOPK_CHANNEL_OK = 0,
  TOPK_CHANNEL_BAD_NUM_ROWS = 1,   /* num_rows > the channel's max_rows */
  TOPK_CHANNEL_BAD_REGION = 2,     /* a region index past the channel's list, or values
                                      named (or not) against options.return_values */
  TOPK_CHANNEL_BAD_SCORES = 3,     /* the rows' extent leaves their region */
  TOPK_CHANNEL_BAD_ROW_PITCH = 4,  /* row_pitch < 1 with more than one row */
  TOPK_CHANNEL_BAD_LENGTHS = 5,    /* the lengths leave their region */
  TOPK_CHANNEL_BAD_INDICES = 6,    /* the indices output leaves its region */
  TOPK_CHANNEL_BAD_VALUES = 7,     /* the values output leaves its region */
  TOPK_CHANNEL_BAD_ROW_STRIDE = 8, /* out_row_stride below K */
  TOPK_CHANNEL_MISALIGNED = 9,     /* an offset not a multiple of its element size */
  TOPK_CHANNEL_OVERLAP = 10,       /* an output overlaps an input or the other output */
  TOPK_CHANNEL_BAD_LENGTH = 11,    /* a row's length < 0 or > its bound (row, value) */
  TOPK_CHANNEL_NAN = 12,           /* a NaN in a row's valid prefix (row) */
  TOPK_CHANNEL_CLOSED = 13,        /* the channel closed before serving the call */
  TOPK_CHANNEL_DEVICE_ERROR = 14   /* the server's device failed the call */
} topk_channel_status;

/* Where a call's data is: byte offsets into the channel's regions
 * (OpenChannelRequest.regions[i] for region index i). Rows are pitched:
 * row r's valid prefix is lengths[r] elements of the channel's dtype at
 * element r * row_pitch of the scores. Row r's K indices (int32) go to
 * element r * out_row_stride of the indices, its values (when the channel
 * returns values) to the same element of the values, in the rows' type. */
typedef struct topk_channel_descriptor {
  uint32_t num_rows;      /* live M, 0..max_rows (0: nothing to do) */
  uint32_t scores_region; /* region indices */
  uint32_t lengths_region;
  uint32_t indices_region;
  uint32_t values_region;  /* TOPK_CHANNEL_NO_REGION without values */
  uint32_t reserved;       /* 0 */
  uint64_t scores_offset;  /* bytes, aligned to the element size */
  uint64_t row_pitch;      /* elements between row starts */
  uint64_t lengths_offset; /* bytes, 4-byte aligned: num_rows int32 */
  uint64_t indices_offset; /* bytes, 4-byte aligned */
  uint64_t values_offset;  /* bytes, aligned to the element size */
  uint64_t out_row_stride; /* elements between output rows; 0 means K */
} topk_channel_descriptor;

/* The block. The hand-off words sit on cache lines of their own: each side
 * polls one and writes the other. */
typedef struct topk_channel_control {
  volatile uint32_t ready; /* client: 1; server: 0 when it takes the call */
  uint32_t pad_ready[15];
  volatile uint32_t done; /* server: 1 after status; client: 0 after waiting */
  uint32_t pad_done[15];
  /* Written by the server before done = 1. */
  volatile uint32_t status;      /* topk_channel_status of the last call */
  volatile int32_t status_row;   /* the row at fault, or -1 */
  volatile int64_t status_value; /* the offending value (a length, an offset) */
  volatile uint64_t calls;       /* calls answered since the channel opened */
  volatile uint64_t errors;      /* of which refused */
  uint32_t pad_status[24];
  topk_channel_descriptor desc; /* at byte 256; written by the client before ready */
} topk_channel_control;

#ifdef __cplusplus
static_assert(sizeof(topk_channel_descriptor) == 72, "descriptor layout");
static_assert(sizeof(topk_channel_control) <= TOPK_CHANNEL_CONTROL_BYTES, "one page");
#endif

/* Byte offsets of the fields a client writes with stream memory operations. */
#define TOPK_CHANNEL_READY_OFFSET 0u
#define TOPK_CHANNEL_DONE_OFFSET 64u
#define TOPK_CHANNEL_STATUS_OFFSET 128u
#define TOPK_CHANNEL_DESC_OFFSET 256u

/* The descriptor field a status names ("" for OK). */
static inline const char* topk_channel_status_field(uint32_t status) {
  switch (status) {
    case TOPK_CHANNEL_OK:
      return "";
    case TOPK_CHANNEL_BAD_NUM_ROWS:
      return "num_rows";
    case TOPK_CHANNEL_BAD_REGION:
      return "region";
    case TOPK_CHANNEL_BAD_SCORES:
      return "scores_offset";
    case TOPK_CHANNEL_BAD_ROW_PITCH:
      return "row_pitch";
    case TOPK_CHANNEL_BAD_LENGTHS:
      return "lengths_offset";
    case TOPK_CHANNEL_BAD_INDICES:
      return "indices_offset";
    case TOPK_CHANNEL_BAD_VALUES:
      return "values_offset";
    case TOPK_CHANNEL_BAD_ROW_STRIDE:
      return "out_row_stride";
    case TOPK_CHANNEL_MISALIGNED:
      return "offset alignment";
    case TOPK_CHANNEL_OVERLAP:
      return "output overlap";
    case TOPK_CHANNEL_BAD_LENGTH:
      return "lengths";
    case TOPK_CHANNEL_NAN:
      return "scores (NaN)";
    case TOPK_CHANNEL_CLOSED:
      return "channel closed";
    case TOPK_CHANNEL_DEVICE_ERROR:
      return "device";
    default:
      return "unknown status";
  }
}

#endif /* TOPK_CHANNEL_CONTROL_BLOCK_H_ */
