#pragma once
// The agent channel's framing (runtime/distrun.proto, top): an 8-byte preface, then protobuf messages each
// preceded by its length as 4 big-endian bytes. Shared by the coordinator's side and the agent's.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace google::protobuf {
class MessageLite;
}

namespace distrun {

// What an agent sends first. An HTTP/2 client's first byte is 'P' ("PRI * HTTP/2.0"), so one byte tells
// the coordinator which protocol a connection speaks.
inline constexpr std::string_view kAgentChannelPreface{"DRUN/1\r\n"};

// Whether `bytes` (the first bytes of a connection) could still become the preface.
bool MayBeAgentPreface(std::string_view bytes);

// Appends `message`, framed, to `out`.
void AppendFrame(const google::protobuf::MessageLite& message, std::string* out);

// Cuts frames out of the bytes of one connection.
class FrameReader {
 public:
  enum class Result { kFrame, kNeedMore, kTooLarge };

  explicit FrameReader(size_t max_frame_bytes) : max_frame_bytes_(max_frame_bytes) {}

  // For frames not yet read: a connection may be allowed more once it has said who it is.
  void set_max_frame_bytes(size_t bytes) { max_frame_bytes_ = bytes; }
  size_t max_frame_bytes() const { return max_frame_bytes_; }

  void Append(const char* data, size_t size);
  // kFrame: `frame` holds the next frame's message bytes, valid until the next Append or Next.
  // kTooLarge: the peer announced a frame over the limit; the connection cannot go on.
  Result Next(std::string_view* frame);
  // Bytes held (a partial frame).
  size_t buffered() const { return buffer_.size() - consumed_; }

 private:
  size_t max_frame_bytes_;
  std::string buffer_;
  size_t consumed_ = 0;
};

}  // namespace distrun
