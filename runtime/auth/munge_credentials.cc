#include "runtime/auth/munge_credentials.h"

#include <dlfcn.h>

#include <cstdlib>
#include <utility>

namespace distrun {
namespace {

// From munge.h (a stable ABI since munge 0.5): the few declarations distrun uses, so that building needs
// no munge headers.
using MungeCtx = struct munge_ctx*;
constexpr int kMungeSuccess = 0;
constexpr int kMungeOptSocket = 8;  // MUNGE_OPT_SOCKET (const char*)
constexpr int kMungeSocketError = 6;
constexpr int kMungeCredReplayed = 17;

using EncodeFn = int (*)(char**, MungeCtx, const void*, int);
using DecodeFn = int (*)(const char*, MungeCtx, void**, int*, uid_t*, gid_t*);
using StrerrorFn = const char* (*)(int);
using CtxCreateFn = MungeCtx (*)();
using CtxDestroyFn = void (*)(MungeCtx);
using CtxSetFn = int (*)(MungeCtx, int, ...);
using CtxStrerrorFn = const char* (*)(MungeCtx);

}  // namespace

struct MungeCredentials::Library {
  void* handle = nullptr;
  EncodeFn encode = nullptr;
  DecodeFn decode = nullptr;
  StrerrorFn strerror = nullptr;
  CtxCreateFn ctx_create = nullptr;
  CtxDestroyFn ctx_destroy = nullptr;
  CtxSetFn ctx_set = nullptr;
  CtxStrerrorFn ctx_strerror = nullptr;
  ~Library() {
    if (handle != nullptr) ::dlclose(handle);
  }
};

namespace {

// A context per call: libmunge's contexts are not to be shared between threads.
class Context {
 public:
  Context(const MungeCredentials::Library& lib, const std::string& socket)
      : lib_(lib), ctx_(lib.ctx_create()) {
    if (ctx_ != nullptr && !socket.empty()) lib_.ctx_set(ctx_, kMungeOptSocket, socket.c_str());
  }
  ~Context() {
    if (ctx_ != nullptr) lib_.ctx_destroy(ctx_);
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;
  MungeCtx get() const { return ctx_; }
  // The context's detailed message, else the code's.
  std::string Error(int code) const {
    const char* detail = ctx_ != nullptr ? lib_.ctx_strerror(ctx_) : nullptr;
    return detail != nullptr ? detail : lib_.strerror(code);
  }

 private:
  const MungeCredentials::Library& lib_;
  MungeCtx ctx_;
};

template <typename Fn>
bool Bind(void* handle, const char* name, Fn* fn) {
  *fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  return *fn != nullptr;
}

}  // namespace

std::unique_ptr<MungeCredentials> MungeCredentials::Load(const std::string& socket, std::string* why) {
  auto lib = std::make_unique<Library>();
  lib->handle = ::dlopen("libmunge.so.2", RTLD_NOW | RTLD_LOCAL);
  if (lib->handle == nullptr) {
    const char* error = ::dlerror();
    *why = std::string("libmunge.so.2 cannot be loaded (") + (error ? error : "not found") +
           "); install munge's library (Debian: libmunge2)";
    return nullptr;
  }
  if (!Bind(lib->handle, "munge_encode", &lib->encode) || !Bind(lib->handle, "munge_decode", &lib->decode) ||
      !Bind(lib->handle, "munge_strerror", &lib->strerror) ||
      !Bind(lib->handle, "munge_ctx_create", &lib->ctx_create) ||
      !Bind(lib->handle, "munge_ctx_destroy", &lib->ctx_destroy) ||
      !Bind(lib->handle, "munge_ctx_set", &lib->ctx_set) ||
      !Bind(lib->handle, "munge_ctx_strerror", &lib->ctx_strerror)) {
    *why = "libmunge.so.2 lacks munge's functions";
    return nullptr;
  }
  return std::unique_ptr<MungeCredentials>(new MungeCredentials(std::move(lib), socket));
}

MungeCredentials::MungeCredentials(std::unique_ptr<Library> library, std::string socket)
    : library_(std::move(library)), socket_(std::move(socket)) {}

MungeCredentials::~MungeCredentials() = default;

std::string MungeCredentials::SocketName() const { return EffectiveMungeSocket(socket_); }

std::optional<std::string> MungeCredentials::Encode(const std::string& payload, std::string* why) const {
  Context ctx(*library_, socket_);
  if (ctx.get() == nullptr) {
    *why = "libmunge cannot create a context";
    return std::nullopt;
  }
  char* credential = nullptr;
  const int rc = library_->encode(&credential, ctx.get(), payload.data(), static_cast<int>(payload.size()));
  if (rc != kMungeSuccess) {
    *why = rc == kMungeSocketError ? "munged does not answer at " + SocketName() + ": " + ctx.Error(rc)
                                   : "munge cannot make a credential: " + ctx.Error(rc);
    std::free(credential);
    return std::nullopt;
  }
  std::string out(credential);
  std::free(credential);
  return out;
}

std::optional<MungeDecoded> MungeCredentials::Decode(const std::string& credential, std::string* why) const {
  Context ctx(*library_, socket_);
  if (ctx.get() == nullptr) {
    *why = "libmunge cannot create a context";
    return std::nullopt;
  }
  void* payload = nullptr;
  int length = 0;
  MungeDecoded decoded;
  const int rc =
      library_->decode(credential.c_str(), ctx.get(), &payload, &length, &decoded.uid, &decoded.gid);
  if (payload != nullptr)
    decoded.payload.assign(static_cast<const char*>(payload), static_cast<size_t>(length));
  std::free(payload);
  if (rc != kMungeSuccess) {
    *why = rc == kMungeSocketError    ? "munged does not answer at " + SocketName() + ": " + ctx.Error(rc)
           : rc == kMungeCredReplayed ? "a replayed munge credential (" + ctx.Error(rc) + ")"
                                      : "a bad munge credential: " + ctx.Error(rc);
    return std::nullopt;
  }
  return decoded;
}

bool MungeCredentials::Probe(std::string* why) const {
  std::optional<std::string> credential = Encode("distrun-probe", why);
  return credential && Decode(*credential, why).has_value();
}

}  // namespace distrun
