#include "server/transport/channel_service.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/transport/raw_messages.h"
#include "server/transport/score_dtype.h"
#include "server/transport/select_reactors.h"
#include "spdlog/spdlog.h"

namespace topk::server {
namespace {

absl::Status CheckCaps(const v1::OpenChannelRequest& request, const RequestLimits& limits) {
  if (request.k() < 1 || request.k() > limits.max_k) {
    return absl::InvalidArgumentError(
        absl::StrCat("k: ", request.k(), " is outside [1, ", limits.max_k, "] (--max_k)"));
  }
  if (request.max_rows() < 1 || request.max_rows() > limits.max_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_rows: ", request.max_rows(), " is outside [1, ", limits.max_rows, "] (--max_rows)"));
  }
  if (request.max_width() < 1 || request.max_width() > limits.max_width) {
    return absl::InvalidArgumentError(absl::StrCat("max_width: ", request.max_width(),
                                                   " is outside [1, ", limits.max_width,
                                                   "] (--max_width)"));
  }
  if (request.regions_size() < 1 ||
      request.regions_size() > static_cast<int>(TOPK_CHANNEL_MAX_REGIONS)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "regions: ", request.regions_size(), " names, must be 1 to ", TOPK_CHANNEL_MAX_REGIONS));
  }
  return absl::OkStatus();
}

}  // namespace

grpc::Status ChannelService::Open(grpc::CallbackServerContext* context,
                                  const v1::OpenChannelRequest& request,
                                  v1::OpenChannelResponse& response) {
  if (absl::Status s = regions_->CheckAllowed(context); !s.ok()) return ToGrpcStatus(s);
  if (channels_ == nullptr) {
    return ToGrpcStatus(absl::UnimplementedError("channels are disabled on this server"));
  }
  if (absl::Status s = CheckCaps(request, engine_->limits()); !s.ok()) return ToGrpcStatus(s);
  absl::StatusOr<ScoreType> dtype = ScoreTypeFromWire(request.dtype(), "dtype");
  if (!dtype.ok()) return ToGrpcStatus(dtype.status());
  ChannelRequest open{.session = request.session_id(),
                      .spec = {.k = request.k(),
                               .options = {.sorted = request.options().sorted(),
                                           .deterministic = request.options().deterministic()},
                               .return_values = request.options().return_values(),
                               .dtype = *dtype,
                               .max_rows = request.max_rows(),
                               .max_width = request.max_width()}};
  const bool gpu_backend = engine_->backend_name() != "cpu";
  const std::vector<absl::string_view> names(request.regions().begin(), request.regions().end());
  absl::StatusOr<ChannelLeases> leased =
      regions_->manager().LeaseForChannel(request.session_id(), names, gpu_backend);
  if (!leased.ok()) return ToGrpcStatus(leased.status());
  open.device_ordinal = leased->device_ordinal;
  for (RegionLease& lease : leased->leases) {
    open.views.push_back(ChannelRegionView{.data = lease->data(), .byte_size = lease->byte_size()});
    open.leases.push_back(std::move(lease));
  }
  const int32_t ordinal = open.device_ordinal;
  absl::StatusOr<OpenedChannel> opened = channels_->Open(std::move(open));
  if (!opened.ok()) return ToGrpcStatus(opened.status());
  response.set_channel_id(opened->id);
  response.set_control_shm_name(opened->control_name);
  response.set_control_bytes(TOPK_CHANNEL_CONTROL_BYTES);
  response.set_layout_version(TOPK_CHANNEL_LAYOUT_VERSION);
  response.set_device_ordinal(ordinal);
  response.set_plan(opened->plan);
  spdlog::info("channel {} opened in session {}: k {}, {} x {}, device {}; {}", opened->id,
               request.session_id(), request.k(), request.max_rows(), request.max_width(), ordinal,
               opened->plan);
  return grpc::Status::OK;
}

grpc::Status ChannelService::Close(grpc::CallbackServerContext* context,
                                   const v1::CloseChannelRequest& request,
                                   v1::CloseChannelResponse& response) {
  if (absl::Status s = regions_->CheckAllowed(context); !s.ok()) return ToGrpcStatus(s);
  if (channels_ == nullptr) {
    return ToGrpcStatus(absl::UnimplementedError("channels are disabled on this server"));
  }
  absl::StatusOr<ChannelTotals> totals =
      channels_->Close(request.session_id(), request.channel_id());
  if (!totals.ok()) return ToGrpcStatus(totals.status());
  response.set_calls(totals->calls);
  response.set_errors(totals->errors);
  return grpc::Status::OK;
}

}  // namespace topk::server
