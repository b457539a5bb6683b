/* C ABI of the RPC client (libtopk_client_c.so): the C++ client library
 * (topk/client/client.h, regions.h) behind opaque handles, for callers that
 * cannot link C++: the Python package loads it with ctypes, which works on
 * any interpreter (an extension module is tied to the one it was built for).
 *
 * Every call that can fail returns a status code, the numbering of gRPC and
 * absl (TOPK_RPC_OK, else e.g. 3 INVALID_ARGUMENT, 5 NOT_FOUND, 14
 * UNAVAILABLE): the server's own code for a request it refused, with its
 * message (which names the field and row) copied into `message` (at most
 * message_bytes - 1 bytes, always NUL-terminated; NULL or 0: no message).
 * A call this library refuses before sending names the field the same way
 * ("request.scores.region: ...", "rows[3]: ...").
 *
 *   topk_rpc_client* client;  topk_rpc_session* session;
 *   topk_rpc_client_options options = {.target = "unix:/run/topk.sock"};
 *   topk_rpc_client_open(&options, &client, msg, sizeof msg);
 *   topk_rpc_session_open(client, TOPK_RPC_CALL_PIPELINE, &session, msg, sizeof msg);
 *   topk_rpc_register_shm(session, "rows", "/my-rows", 0, bytes, msg, sizeof msg);
 *   topk_rpc_select_ref(session, &request, &answer, msg, sizeof msg);
 *
 * Handles are safe to use from several threads; a session's pipelined
 * selects take turns on its one stream. Nothing of C++ crosses this header. */
#ifndef TOPK_CLIENT_TOPK_CLIENT_C_H_
#define TOPK_CLIENT_TOPK_CLIENT_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a struct below changes layout or a function its meaning. */
#define TOPK_RPC_ABI_VERSION 1

#define TOPK_RPC_OK 0
#define TOPK_RPC_INVALID_ARGUMENT 3 /* the code of a call refused before sending */

/* How a session sends its selects: on one SelectPipeline stream it keeps
 * open (the lighter path), or one unary Select each. */
#define TOPK_RPC_CALL_PIPELINE 0
#define TOPK_RPC_CALL_UNARY 1

/* Score types: topk.v1.ScoreType's values. */
#define TOPK_RPC_FP32 0
#define TOPK_RPC_BF16 1
#define TOPK_RPC_FP16 2

/* Option bits (SelectOptions). */
#define TOPK_RPC_SORTED 1u
#define TOPK_RPC_DETERMINISTIC 2u
#define TOPK_RPC_RETURN_VALUES 4u

typedef struct topk_rpc_client topk_rpc_client;   /* a gRPC channel */
typedef struct topk_rpc_session topk_rpc_session; /* a region session on a client */

int32_t topk_rpc_abi_version(void);

typedef struct topk_rpc_client_options {
  const char* target;                /* "unix:/run/topk.sock", "127.0.0.1:50051", ... */
  int64_t max_send_message_bytes;    /* <= 0: 1 GiB */
  int64_t max_receive_message_bytes; /* <= 0: 1 GiB */
  const char* load_balancing_policy; /* NULL or "": gRPC's default (pick_first) */
} topk_rpc_client_options;

int32_t topk_rpc_client_open(const topk_rpc_client_options* options, topk_rpc_client** client,
                             char* message, size_t message_bytes);

/* TLS for topk_rpc_client_open_tls, as PEM text (not paths); NULL or "" for
 * what is not given. root_certs_pem: the roots the server's certificate
 * must chain to (NULL: the system roots). cert_chain_pem, private_key_pem:
 * this client's certificate, for a server that requires one (mutual TLS,
 * its --tls_client_ca); both or neither. server_name: the name checked in
 * the server's certificate when it is not the target's host. */
typedef struct topk_rpc_tls_options {
  const char* root_certs_pem;
  const char* cert_chain_pem;
  const char* private_key_pem;
  const char* server_name;
} topk_rpc_tls_options;

/* topk_rpc_client_open over TLS (tls NULL: plaintext, as topk_rpc_client_open).
 * A handshake the server refuses (no client certificate, an expired one,
 * one from another CA) fails the first call with UNAVAILABLE. */
int32_t topk_rpc_client_open_tls(const topk_rpc_client_options* options,
                                 const topk_rpc_tls_options* tls, topk_rpc_client** client,
                                 char* message, size_t message_bytes);
/* Sessions opened on the client keep its channel alive: close them in any
 * order. NULL is ignored. */
void topk_rpc_client_close(topk_rpc_client* client);

/* OpenSession, held open until topk_rpc_session_close (or process exit),
 * which releases every region registered through it. */
int32_t topk_rpc_session_open(topk_rpc_client* client, int32_t call_path,
                              topk_rpc_session** session, char* message, size_t message_bytes);
void topk_rpc_session_close(topk_rpc_session* session);
/* The session id; valid until topk_rpc_session_close. */
const char* topk_rpc_session_id(const topk_rpc_session* session);

/* Region registration (docs/regions.md). Shared memory carries the
 * session's ownership proof while it registers. */
int32_t topk_rpc_register_shm(topk_rpc_session* session, const char* name, const char* shm_name,
                              uint64_t offset, uint64_t byte_size, char* message,
                              size_t message_bytes);
/* gpu_uuid "GPU-..." (NULL or "": by ordinal in the server's process). */
int32_t topk_rpc_register_cuda_ipc(topk_rpc_session* session, const char* name,
                                   const void* ipc_handle, size_t handle_bytes, uint64_t offset,
                                   uint64_t byte_size, const char* gpu_uuid, int32_t gpu_ordinal,
                                   char* message, size_t message_bytes);
int32_t topk_rpc_register_cuda_event(topk_rpc_session* session, const char* name,
                                     const void* ipc_event_handle, size_t handle_bytes,
                                     const char* gpu_uuid, int32_t gpu_ordinal, char* message,
                                     size_t message_bytes);
int32_t topk_rpc_unregister(topk_rpc_session* session, const char* name, char* message,
                            size_t message_bytes);
/* *count: how many were released (may be NULL). */
int32_t topk_rpc_unregister_all(topk_rpc_session* session, int32_t* count, char* message,
                                size_t message_bytes);

/* A place in a registered region; region NULL: none. */
typedef struct topk_rpc_ref {
  const char* region;
  uint64_t offset; /* bytes from the region's start */
} topk_rpc_ref;

/* Select by reference (topk.v1.RegionRows and RegionOutput). Rows at
 * scores + r * row_pitch elements; lengths inline (num_rows of them) or in
 * lengths_ref (then width bounds every length). out_indices.region NULL: the
 * answer comes back in the reply, into the topk_rpc_answer. */
typedef struct topk_rpc_ref_select {
  int32_t k;
  int32_t num_rows;
  uint32_t options; /* TOPK_RPC_SORTED | ... (RETURN_VALUES is implied by out_values) */
  int32_t dtype;    /* TOPK_RPC_FP32 / BF16 / FP16 */
  topk_rpc_ref scores;
  int64_t row_pitch;      /* elements of dtype */
  const int32_t* lengths; /* num_lengths of them (the server checks the count) */
  int32_t num_lengths;
  topk_rpc_ref lengths_ref;
  int32_t width;
  topk_rpc_ref out_indices;
  topk_rpc_ref out_values;
  int64_t out_row_stride; /* elements; 0: k */
  const char* wait_event; /* registered CUDA event regions; NULL: none */
  const char* record_event;
  const char* request_id; /* NULL: none */
} topk_rpc_ref_select;

/* Server-side and round-trip times of one call, microseconds. */
typedef struct topk_rpc_timings {
  int64_t queue_us;
  int64_t device_us;
  int64_t total_us;
  int64_t prepare_us;
  int64_t client_us;
  int32_t batch_requests;
} topk_rpc_timings;

/* Where an answer that comes back in the reply goes: indices (and values,
 * elements of the rows' type, when asked for) of num_rows x k each, row r at
 * r * k. capacity: elements each buffer holds; a reply that does not fit is
 * an error (OUT_OF_RANGE) and nothing is written. The shape and the timings
 * are filled in on success; for an answer by reference only they are. */
typedef struct topk_rpc_answer {
  int32_t* indices;
  void* values;
  int64_t capacity;
  int64_t num_rows;
  int32_t k;
  topk_rpc_timings timings;
} topk_rpc_answer;

/* `answer` may be NULL when the output is by reference. */
int32_t topk_rpc_select_ref(topk_rpc_session* session, const topk_rpc_ref_select* request,
                            topk_rpc_answer* answer, char* message, size_t message_bytes);

/* Select with the rows inline (one unary Select): row r is lengths[r]
 * elements of dtype at rows[r], sent from where they are (the message is gathered
 * from the rows, no copy of them is made). The rows must not change during the
 * call. */
typedef struct topk_rpc_inline_select {
  int32_t k;
  int32_t num_rows;
  uint32_t options; /* TOPK_RPC_SORTED | TOPK_RPC_DETERMINISTIC | TOPK_RPC_RETURN_VALUES */
  int32_t dtype;
  const void* const* rows;
  const int32_t* lengths;
  const char* request_id; /* NULL: none */
  int64_t timeout_us;     /* <= 0: none */
} topk_rpc_inline_select;

int32_t topk_rpc_select_inline(topk_rpc_client* client, const topk_rpc_inline_select* request,
                               topk_rpc_answer* answer, char* message, size_t message_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* TOPK_CLIENT_TOPK_CLIENT_C_H_ */
