/* The native RPC core's C ABI from C (compiled as C11: the header holds no
 * C++), with no server: the version, the argument checks that need none
 * (each names its field, and its row where there is one), the message
 * truncation, and a call to a server that is not there. */
#include "topk/client/topk_client_c.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(const char* what, int32_t got, int32_t code, const char* message,
                   const char* words) {
  if (got != code || strstr(message, words) == NULL) {
    fprintf(stderr, "FAIL %s: code %d (want %d), message '%s' (want '%s')\n", what, got, code,
            message, words);
    ++failures;
  }
}

int main(void) {
  char message[512];
  if (topk_rpc_abi_version() != TOPK_RPC_ABI_VERSION) {
    fprintf(stderr, "FAIL abi version %d\n", topk_rpc_abi_version());
    return 1;
  }
  topk_rpc_client* client = NULL;
  expect("options NULL", topk_rpc_client_open(NULL, &client, message, sizeof message),
         TOPK_RPC_INVALID_ARGUMENT, message, "options: NULL");
  topk_rpc_client_options options = {.target = ""};
  expect("empty target", topk_rpc_client_open(&options, &client, message, sizeof message),
         TOPK_RPC_INVALID_ARGUMENT, message, "options.target: NULL or empty");
  /* A message cut to the buffer, NUL-terminated. */
  char small[8];
  topk_rpc_client_open(&options, &client, small, sizeof small);
  expect("truncated", (int32_t)strlen(small), 7, small, "options");

  /* TLS: the client's certificate without its key (or the other way) is
   * refused before any channel exists; with both, or neither, it opens. */
  topk_rpc_client_options tls_target = {.target = "127.0.0.1:1"};
  topk_rpc_tls_options tls = {.cert_chain_pem = "-----BEGIN CERTIFICATE-----"};
  expect("tls cert without key",
         topk_rpc_client_open_tls(&tls_target, &tls, &client, message, sizeof message),
         TOPK_RPC_INVALID_ARGUMENT, message, "tls.private_key_pem: NULL or empty");
  tls = (topk_rpc_tls_options){.private_key_pem = "-----BEGIN PRIVATE KEY-----"};
  expect("tls key without cert",
         topk_rpc_client_open_tls(&tls_target, &tls, &client, message, sizeof message),
         TOPK_RPC_INVALID_ARGUMENT, message, "tls.cert_chain_pem: NULL or empty");
  tls = (topk_rpc_tls_options){.server_name = "localhost"};
  expect("tls open", topk_rpc_client_open_tls(&tls_target, &tls, &client, message, sizeof message),
         TOPK_RPC_OK, "", "");
  topk_rpc_client_close(client);
  client = NULL;

  /* Nothing listens on port 1: the channel opens (lazily), a call fails. */
  options.target = "127.0.0.1:1";
  expect("open", topk_rpc_client_open(&options, &client, message, sizeof message), TOPK_RPC_OK, "",
         "");
  topk_rpc_session* session = NULL;
  expect("session, bad path", topk_rpc_session_open(client, 5, &session, message, sizeof message),
         TOPK_RPC_INVALID_ARGUMENT, message, "call_path: 5");
  expect("select_ref, no session", topk_rpc_select_ref(NULL, NULL, NULL, message, sizeof message),
         TOPK_RPC_INVALID_ARGUMENT, message, "session: NULL");

  const float row0[4] = {1, 2, 3, 4};
  const void* rows[2] = {row0, NULL};
  int32_t lengths[2] = {4, -1};
  int32_t indices[8];
  topk_rpc_answer answer = {.indices = indices, .capacity = 8};
  topk_rpc_inline_select request = {.k = 2, .num_rows = 2, .rows = rows, .lengths = lengths};
  expect("negative length",
         topk_rpc_select_inline(client, &request, &answer, message, sizeof message),
         TOPK_RPC_INVALID_ARGUMENT, message, "request.lengths[1]: -1 (>= 0)");
  lengths[1] = 3;
  expect("row NULL", topk_rpc_select_inline(client, &request, &answer, message, sizeof message),
         TOPK_RPC_INVALID_ARGUMENT, message, "request.rows[1]: NULL for a row of 3 elements");
  request.dtype = 5;
  expect("dtype", topk_rpc_select_inline(client, &request, &answer, message, sizeof message),
         TOPK_RPC_INVALID_ARGUMENT, message, "request.dtype: 5 is not a score type");
  request.dtype = TOPK_RPC_FP32;
  rows[1] = row0;
  /* 14: UNAVAILABLE, gRPC's own words about the connection. */
  const int32_t unavailable =
      topk_rpc_select_inline(client, &request, &answer, message, sizeof message);
  expect("no server", unavailable, 14, message, "");
  topk_rpc_client_close(client);
  topk_rpc_client_close(NULL);
  topk_rpc_session_close(NULL);
  if (failures == 0) printf("topk_client_c: C ABI checks ok\n");
  return failures == 0 ? 0 : 1;
}
