#include "runtime/transport/agent_frames.h"

#include <google/protobuf/message_lite.h>

namespace distrun {

bool MayBeAgentPreface(std::string_view bytes) {
  return kAgentChannelPreface.substr(0, bytes.size()) == bytes.substr(0, kAgentChannelPreface.size());
}

void AppendFrame(const google::protobuf::MessageLite& message, std::string* out) {
  const size_t size = message.ByteSizeLong();
  const size_t at = out->size();
  out->resize(at + 4 + size);
  auto* p = reinterpret_cast<unsigned char*>(out->data() + at);
  p[0] = static_cast<unsigned char>(size >> 24);
  p[1] = static_cast<unsigned char>(size >> 16);
  p[2] = static_cast<unsigned char>(size >> 8);
  p[3] = static_cast<unsigned char>(size);
  message.SerializeWithCachedSizesToArray(p + 4);
}

void FrameReader::Append(const char* data, size_t size) {
  // Drop what earlier frames used before growing, so a long-lived connection holds one partial frame.
  if (consumed_ > 0 && consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ > 4096 && consumed_ * 2 > buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(data, size);
}

FrameReader::Result FrameReader::Next(std::string_view* frame) {
  const size_t available = buffer_.size() - consumed_;
  if (available < 4) return Result::kNeedMore;
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + consumed_);
  const size_t size = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | size_t{p[3]};
  if (size > max_frame_bytes_) return Result::kTooLarge;
  if (available < 4 + size) return Result::kNeedMore;
  *frame = std::string_view(buffer_.data() + consumed_ + 4, size);
  consumed_ += 4 + size;
  return Result::kFrame;
}

}  // namespace distrun
