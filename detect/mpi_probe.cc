#include "detect/mpi_probe.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string_view>

#include "detect/random_hex.h"

namespace distrun {
namespace {

// ---- The two ABIs ----------------------------------------------------------------------------------
//
// The MPI standard fixes the C function signatures but not what a handle is. The probe needs a
// communicator, the byte and int datatypes and MPI_INFO_NULL, plus MPI_COMM_TYPE_SHARED:
//
// Open MPI 4.1 (/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h): every handle is a pointer to a predefined
// global object (`#define MPI_COMM_WORLD OMPI_PREDEFINED_GLOBAL(MPI_Comm, ompi_mpi_comm_world)`, i.e.
// &ompi_mpi_comm_world; MPI_BYTE &ompi_mpi_byte, MPI_INT &ompi_mpi_int, MPI_INFO_NULL &ompi_mpi_info_null),
// found here with dlsym; MPI_COMM_TYPE_SHARED is 0, the first value of an enum. Open MPI 5 keeps this ABI
// and the soname libmpi.so.40.
//
// MPICH 4.0 (/usr/include/x86_64-linux-gnu/mpich/mpi.h), and the libraries that share its ABI (Intel MPI,
// MVAPICH, Cray MPICH): handles are ints, `#define MPI_COMM_WORLD ((MPI_Comm)0x44000000)`,
// `MPI_BYTE ((MPI_Datatype)0x4c00010d)`, `MPI_INT ((MPI_Datatype)0x4c000405)`,
// `MPI_INFO_NULL ((MPI_Info)0x1c000000)`, `MPI_COMM_TYPE_SHARED 1`.
//
// MPI_SUCCESS is 0 in both.

constexpr int kMpiSuccess = 0;
constexpr int kMpichCommWorld = 0x44000000;
constexpr int kMpichByte = 0x4c00010d;
constexpr int kMpichInt = 0x4c000405;
constexpr int kMpichInfoNull = 0x1c000000;
constexpr int kMpichCommTypeShared = 1;
constexpr int kOmpiCommTypeShared = 0;

// MPI_MAX_LIBRARY_VERSION_STRING: 256 in Open MPI, 8192 in MPICH; the larger fits both.
constexpr int kMaxLibraryVersion = 8192;

// One ABI's handles and the entry points the probe calls, with that ABI's handle type.
template <typename Handle>
struct Mpi {
  Handle comm_world{};
  Handle byte{};
  Handle integer{};
  Handle info_null{};
  int comm_type_shared = 0;

  int (*init)(int*, char***) = nullptr;
  int (*finalize)() = nullptr;
  int (*comm_rank)(Handle, int*) = nullptr;
  int (*comm_size)(Handle, int*) = nullptr;
  int (*comm_split_type)(Handle, int, int, Handle, Handle*) = nullptr;
  int (*comm_split)(Handle, int, int, Handle*) = nullptr;
  int (*comm_free)(Handle*) = nullptr;
  int (*bcast)(void*, int, Handle, int, Handle) = nullptr;
  int (*allgather)(const void*, int, Handle, void*, int, Handle, Handle) = nullptr;
};

using GetLibraryVersionFn = int (*)(char*, int*);

class ProbeFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename Fn>
void Bind(void* library, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(library, name));
  if (fn == nullptr) missing += (missing.empty() ? "" : ", ") + std::string(name);
}

template <typename Handle>
void BindEntryPoints(void* library, const std::string& name, Mpi<Handle>& mpi) {
  std::string missing;
  Bind(library, "MPI_Init", mpi.init, missing);
  Bind(library, "MPI_Finalize", mpi.finalize, missing);
  Bind(library, "MPI_Comm_rank", mpi.comm_rank, missing);
  Bind(library, "MPI_Comm_size", mpi.comm_size, missing);
  Bind(library, "MPI_Comm_split_type", mpi.comm_split_type, missing);
  Bind(library, "MPI_Comm_split", mpi.comm_split, missing);
  Bind(library, "MPI_Comm_free", mpi.comm_free, missing);
  Bind(library, "MPI_Bcast", mpi.bcast, missing);
  Bind(library, "MPI_Allgather", mpi.allgather, missing);
  if (!missing.empty()) {
    throw ProbeFailure(name + " lacks " + missing +
                       ": it is not an MPI-3 library; point DISTRUN_MPI_LIBRARY at " +
                       "the launcher's libmpi");
  }
}

void Check(int rc, const char* call) {
  if (rc != kMpiSuccess)
    throw ProbeFailure(std::string(call) + " failed with MPI error code " + std::to_string(rc));
}

// ---- What rank 0 chooses for everyone ----------------------------------------------------------------

constexpr size_t kHostBytes = 256;  // a host name with its NUL (Linux allows 64)
constexpr size_t kJobIdHex = 12;
constexpr size_t kTokenHex = 64;  // 256 random bits

// Broadcast as bytes. A failure on rank 0 travels in `error`, so every rank reports it instead of waiting
// in a broadcast that rank 0 never joins.
struct RankZeroChoice {
  std::array<int, 3> ports{};
  std::array<char, kJobIdHex + 1> job_id{};
  std::array<char, kTokenHex + 1> token{};
  std::array<char, 240> error{};
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  int get() const { return fd_; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

std::string Errno(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Three distinct ports free on every address of this host: all three sockets stay bound until each port is
// read, so the kernel cannot hand out one twice.
std::array<int, 3> FreePorts() {
  std::array<int, 3> ports{};
  std::array<int, 3> fds{-1, -1, -1};
  std::string error;
  for (size_t i = 0; i < fds.size() && error.empty(); ++i) {
    fds[i] = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof(addr);
    if (fds[i] < 0 || ::bind(fds[i], reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        ::getsockname(fds[i], reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      error = Errno("cannot find a free TCP port on rank 0's host");
    } else {
      ports[i] = ntohs(addr.sin_port);
    }
  }
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
  if (!error.empty()) throw ProbeFailure(error);
  return ports;
}

template <size_t N>
void CopyTo(std::array<char, N>& out, std::string_view text) {
  size_t n = std::min(text.size(), N - 1);
  std::memcpy(out.data(), text.data(), n);
  out[n] = '\0';
}

template <size_t N>
std::string CString(const std::array<char, N>& in) {
  return std::string(in.data(), strnlen(in.data(), N));
}

RankZeroChoice ChooseOnRankZero() {
  RankZeroChoice choice;
  try {
    choice.ports = FreePorts();
    CopyTo(choice.job_id, RandomHex(kJobIdHex));
    CopyTo(choice.token, RandomHex(kTokenHex));
  } catch (const std::runtime_error& e) {  // ProbeFailure, or RandomHex's
    CopyTo(choice.error, e.what());
  }
  return choice;
}

std::array<char, kHostBytes> ThisHost() {
  std::array<char, kHostBytes> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) throw ProbeFailure(Errno("gethostname"));
  return name;
}

// ---- The probe itself (in the child) -------------------------------------------------------------------

template <typename Handle>
MpiProbeResult Probe(const Mpi<Handle>& mpi) {
  Check(mpi.init(nullptr, nullptr), "MPI_Init");
  MpiProbeResult r;
  const Handle world = mpi.comm_world;
  Check(mpi.comm_rank(world, &r.rank), "MPI_Comm_rank");
  Check(mpi.comm_size(world, &r.size), "MPI_Comm_size");

  // Ordered by world rank, so local rank 0 is the node's lowest rank.
  Handle node{};
  Check(mpi.comm_split_type(world, mpi.comm_type_shared, r.rank, mpi.info_null, &node),
        "MPI_Comm_split_type");
  Check(mpi.comm_rank(node, &r.local_rank), "MPI_Comm_rank");
  Check(mpi.comm_size(node, &r.local_size), "MPI_Comm_size");

  // Each node's lowest rank speaks for it; ordering them by world rank numbers the nodes, rank 0's first.
  Handle leaders{};
  Check(mpi.comm_split(world, r.local_rank == 0 ? 0 : 1, r.rank, &leaders), "MPI_Comm_split");
  std::array<int, 2> node_info{};  // node rank, node count
  std::vector<char> names;
  if (r.local_rank == 0) {
    Check(mpi.comm_rank(leaders, &node_info[0]), "MPI_Comm_rank");
    Check(mpi.comm_size(leaders, &node_info[1]), "MPI_Comm_size");
    std::array<char, kHostBytes> host = ThisHost();
    names.resize(kHostBytes * static_cast<size_t>(node_info[1]));
    Check(mpi.allgather(host.data(), static_cast<int>(kHostBytes), mpi.byte, names.data(),
                        static_cast<int>(kHostBytes), mpi.byte, leaders),
          "MPI_Allgather");
  }
  Check(mpi.bcast(node_info.data(), 2, mpi.integer, 0, node), "MPI_Bcast");
  names.resize(kHostBytes * static_cast<size_t>(node_info[1]));
  Check(mpi.bcast(names.data(), static_cast<int>(names.size()), mpi.byte, 0, node), "MPI_Bcast");

  RankZeroChoice choice;
  if (r.rank == 0) choice = ChooseOnRankZero();
  Check(mpi.bcast(&choice, static_cast<int>(sizeof(choice)), mpi.byte, 0, world), "MPI_Bcast");

  Check(mpi.comm_free(&leaders), "MPI_Comm_free");
  Check(mpi.comm_free(&node), "MPI_Comm_free");
  Check(mpi.finalize(), "MPI_Finalize");

  if (choice.error[0] != '\0') throw ProbeFailure("rank 0: " + CString(choice.error));
  r.node_rank = node_info[0];
  r.num_nodes = node_info[1];
  for (size_t i = 0; i < static_cast<size_t>(r.num_nodes); ++i) {
    const char* name = names.data() + i * kHostBytes;
    r.hosts.emplace_back(name, strnlen(name, kHostBytes));
  }
  r.coordinator_port = choice.ports[0];
  r.master_port = choice.ports[1];
  r.jax_port = choice.ports[2];
  r.job_id = CString(choice.job_id);
  r.token = CString(choice.token);
  return r;
}

std::string LibraryVersion(void* library) {
  auto get_version = reinterpret_cast<GetLibraryVersionFn>(dlsym(library, "MPI_Get_library_version"));
  if (get_version == nullptr) return "";
  std::string text(static_cast<size_t>(kMaxLibraryVersion), '\0');
  int len = 0;
  if (get_version(text.data(), &len) != kMpiSuccess) return "";
  text.resize(strnlen(text.c_str(), text.size()));
  // The first line names the library ("Open MPI v4.1.4, ...", "MPICH Version:\t4.0.2").
  std::string line = text.substr(0, text.find('\n'));
  for (char& c : line) {
    if (c == '\t') c = ' ';
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

bool IsMpichFamily(std::string_view version) {
  for (std::string_view mark : {"MPICH", "Intel(R) MPI", "MVAPICH"}) {
    if (version.find(mark) != std::string_view::npos) return true;
  }
  return false;
}

MpiProbeResult ProbeLibrary(void* library, const std::string& name) {
  const std::string version = LibraryVersion(library);
  MpiProbeResult r;
  if (void* world = dlsym(library, "ompi_mpi_comm_world")) {
    Mpi<void*> mpi;
    mpi.comm_world = world;
    mpi.byte = dlsym(library, "ompi_mpi_byte");
    mpi.integer = dlsym(library, "ompi_mpi_int");
    mpi.info_null = dlsym(library, "ompi_mpi_info_null");
    mpi.comm_type_shared = kOmpiCommTypeShared;
    if (mpi.byte == nullptr || mpi.integer == nullptr || mpi.info_null == nullptr) {
      throw ProbeFailure(name + " exports ompi_mpi_comm_world but not ompi_mpi_byte, ompi_mpi_int and " +
                         "ompi_mpi_info_null: not an Open MPI the probe knows");
    }
    BindEntryPoints(library, name, mpi);
    r = Probe(mpi);
  } else if (IsMpichFamily(version)) {
    Mpi<int> mpi;
    mpi.comm_world = kMpichCommWorld;
    mpi.byte = kMpichByte;
    mpi.integer = kMpichInt;
    mpi.info_null = kMpichInfoNull;
    mpi.comm_type_shared = kMpichCommTypeShared;
    BindEntryPoints(library, name, mpi);
    r = Probe(mpi);
  } else {
    throw ProbeFailure(
        name + " (" + (version.empty() ? std::string("no MPI_Get_library_version") : version) +
        ") is neither Open MPI nor of the MPICH family, the two MPI ABIs distrun knows; point " +
        "DISTRUN_MPI_LIBRARY at a library of one of those");
  }
  r.library = name;
  r.version = version;
  return r;
}

// dlerror() repeats the file name first ("libx.so: cannot open ..."): keep only the reason.
std::string LoadError(const std::string& name) {
  const char* message = dlerror();
  std::string reason = message != nullptr ? message : "unknown error";
  if (reason.starts_with(name + ": ")) reason.erase(0, name.size() + 2);
  return reason;
}

MpiProbeOutcome ProbeInThisProcess(const std::vector<std::string>& libraries) {
  std::string tried;
  for (const std::string& name : libraries) {
    // RTLD_GLOBAL: Open MPI's components, loaded by MPI_Init, resolve symbols of libmpi. The library is
    // never closed: the process ends right after MPI_Finalize.
    void* library = dlopen(name.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (library == nullptr) {
      tried += (tried.empty() ? "" : ", ") + name + " (" + LoadError(name) + ")";
      continue;
    }
    try {
      return {ProbeLibrary(library, name), ""};
    } catch (const ProbeFailure& e) {
      return {std::nullopt, e.what()};
    }
  }
  return {std::nullopt, "no MPI library could be loaded: tried " +
                            (tried.empty() ? std::string("none") : tried) +
                            "; install the MPI of the launcher that started distrun, or set "
                            "DISTRUN_MPI_LIBRARY to the path of its libmpi"};
}

// ---- The child process and its answer ------------------------------------------------------------------

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string ExitDescription(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* what = ::strsignal(sig);  // "Segmentation fault" (sigabbrev_np's "SEGV" is glibc 2.32's)
    return "died from signal " + std::to_string(sig) +
           (what != nullptr ? " (" + std::string(what) + ")" : "");
  }
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

std::string Joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

MpiProbeOutcome Failed(std::string error) { return {std::nullopt, std::move(error)}; }

std::optional<int> Number(std::string_view text) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::vector<std::string> MpiLibraries(const Environment& env) {
  if (const std::string* chosen = env.Get("DISTRUN_MPI_LIBRARY"); chosen != nullptr && !chosen->empty()) {
    return {*chosen};
  }
  // Open MPI's soname has been libmpi.so.40 since 3.0; MPICH's is libmpich.so.12 (Debian ships only that)
  // or libmpi.so.12 (upstream installs, Intel MPI, MVAPICH, Cray MPICH).
  const std::vector<std::string> open_mpi = {"libmpi.so.40"};
  const std::vector<std::string> mpich = {"libmpich.so.12", "libmpi.so.12"};
  if (env.Has("OMPI_COMM_WORLD_SIZE") || env.Has("OMPI_COMM_WORLD_RANK")) return open_mpi;
  for (const char* name :
       {"PMI_RANK", "PMI_SIZE", "PMI_FD", "PALS_RANKID", "MV2_COMM_WORLD_RANK", "MVP_COMM_WORLD_RANK"}) {
    if (env.Has(name)) return mpich;
  }
  std::vector<std::string> all = open_mpi;
  all.insert(all.end(), mpich.begin(), mpich.end());
  return all;
}

MpiProbeOutcome RunMpiProbe(const std::vector<std::string>& libraries) {
  return RunMpiProbeWithin(libraries, kMpiProbeTimeoutSeconds);
}

MpiProbeOutcome RunMpiProbeWithin(const std::vector<std::string>& libraries, int timeout_seconds) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Failed(Errno("cannot start the MPI probe: pipe"));
  Fd read_end(fds[0]);
  Fd write_end(fds[1]);
  // distrun is still single-threaded while it detects, so the child may allocate and load libraries.
  pid_t pid = ::fork();
  if (pid < 0) return Failed(Errno("cannot start the MPI probe: fork"));
  if (pid == 0) {
    read_end.Close();
    // MPI libraries print warnings on stdout; --detect's stdout must stay a clean report.
    ::dup2(STDERR_FILENO, STDOUT_FILENO);
    std::string answer;
    try {
      answer = EncodeMpiProbe(ProbeInThisProcess(libraries));
    } catch (const std::exception& e) {
      answer = EncodeMpiProbe(Failed(e.what()));
    }
    // _exit: the parent's atexit handlers and stdio buffers are not the child's to run.
    ::_exit(WriteAll(write_end.get(), answer) ? 0 : 1);
  }
  write_end.Close();  // so that the read below ends when the child does

  std::string text;
  bool timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  for (;;) {
    auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 60'000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if (ready == 0) continue;
    std::array<char, 4096> buffer{};
    ssize_t n = ::read(read_end.get(), buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer.data(), static_cast<size_t>(n));
  }
  if (timed_out) ::kill(pid, SIGKILL);  // our own child, stuck in MPI
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    return Failed(
        "MPI (" + Joined(libraries) + ") did not answer within " + std::to_string(timeout_seconds) +
        " s: every rank of the job must run distrun with the same detection options, and MPI_Init waits " +
        "for all of them");
  }
  if (text.empty()) {
    return Failed("the MPI probe (" + Joined(libraries) + ") " + ExitDescription(status) +
                  " without an answer; the launcher's messages above say why");
  }
  return DecodeMpiProbe(text);
}

std::string EncodeMpiProbe(const MpiProbeOutcome& outcome) {
  if (!outcome.result) return "error " + OneLine(outcome.error) + "\n";
  const MpiProbeResult& r = *outcome.result;
  std::string out;
  auto field = [&out](std::string_view key, const std::string& value) {
    out += std::string(key) + " " + OneLine(value) + "\n";
  };
  field("library", r.library);
  field("version", r.version);
  field("rank", std::to_string(r.rank));
  field("size", std::to_string(r.size));
  field("local_rank", std::to_string(r.local_rank));
  field("local_size", std::to_string(r.local_size));
  field("node_rank", std::to_string(r.node_rank));
  field("num_nodes", std::to_string(r.num_nodes));
  for (const std::string& host : r.hosts) field("host", host);
  field("coordinator_port", std::to_string(r.coordinator_port));
  field("master_port", std::to_string(r.master_port));
  field("jax_port", std::to_string(r.jax_port));
  field("job_id", r.job_id);
  field("token", r.token);
  return out;
}

MpiProbeOutcome DecodeMpiProbe(const std::string& text) {
  if (text.starts_with("error ")) {
    std::string error = text.substr(6);
    while (!error.empty() && error.back() == '\n') error.pop_back();
    return Failed(error);
  }
  MpiProbeResult r;
  std::vector<std::string> seen;
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t end = rest.find('\n');
    if (end == std::string_view::npos) return Failed("the MPI probe's answer was cut short");
    std::string_view line = rest.substr(0, end);
    rest.remove_prefix(end + 1);
    size_t space = line.find(' ');
    if (space == std::string_view::npos) return Failed("the MPI probe's answer is malformed");
    std::string key(line.substr(0, space));
    std::string value(line.substr(space + 1));
    if (key == "host") {
      r.hosts.push_back(value);
      continue;
    }
    seen.push_back(key);
    if (key == "library") {
      r.library = value;
    } else if (key == "version") {
      r.version = value;
    } else if (key == "job_id") {
      r.job_id = value;
    } else if (key == "token") {
      r.token = value;
    } else {
      std::optional<int> number = Number(value);
      int* target = key == "rank"               ? &r.rank
                    : key == "size"             ? &r.size
                    : key == "local_rank"       ? &r.local_rank
                    : key == "local_size"       ? &r.local_size
                    : key == "node_rank"        ? &r.node_rank
                    : key == "num_nodes"        ? &r.num_nodes
                    : key == "coordinator_port" ? &r.coordinator_port
                    : key == "master_port"      ? &r.master_port
                    : key == "jax_port"         ? &r.jax_port
                                                : nullptr;
      if (target == nullptr || !number) return Failed("the MPI probe's answer is malformed at '" + key + "'");
      *target = *number;
    }
  }
  for (const char* key : {"library", "version", "rank", "size", "local_rank", "local_size", "node_rank",
                          "num_nodes", "coordinator_port", "master_port", "jax_port", "job_id", "token"}) {
    if (std::find(seen.begin(), seen.end(), key) == seen.end()) {
      return Failed("the MPI probe's answer lacks '" + std::string(key) + "'");
    }
  }
  return {r, ""};
}

}  // namespace distrun
