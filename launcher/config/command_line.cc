#include "launcher/config/command_line.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>
#include <optional>
#include <string_view>
#include <utility>

#include "detect/errors.h"
#include "launcher/config/closest_name.h"

namespace distrun {
namespace {

constexpr const char* kUsage =
    "distrun: launch and supervise distributed GPU jobs on Slurm, MPI, TPU, Kubernetes or one machine.\n\n"
    "Usage:\n"
    "  distrun [OPTIONS] -- COMMAND [ARGS...]      spawn workers for COMMAND and supervise them\n"
    "  distrun [OPTIONS] SCRIPT.py [ARGS...]       as torchrun: each worker runs python -u SCRIPT.py\n"
    "  distrun [OPTIONS] -m MODULE [ARGS...]       as torchrun -m: each worker runs python -u -m MODULE\n"
    "  distrun -H HOST[:N],... [OPTIONS] -- CMD    start the job on these hosts over ssh, from here\n"
    "  distrun --detect [--format FORMAT]          print the detected topology and the per-worker plan\n"
    "  distrun --dry-run [OPTIONS] -- COMMAND      print the plan for COMMAND and exit\n"
    "  distrun kv VERB ARGS...                     the job's key-value store, from a worker (get, set...)\n"
    "  distrun barrier NAME [--timeout S]          wait until every worker of the job reaches barrier NAME\n"
    "  distrun progress STEP                       tell the hang watch this worker reached STEP\n"
    "  distrun stacks [--full]                     every worker's stack, merged into one picture\n"
    "  distrun status                              the job's epoch, nodes and each rank's progress\n"
    "  distrun check [OPTIONS] [-- CHECK-OPTIONS]  NCCL all-reduce bandwidth over the GPUs\n\n"
    "Every option can also be set as an environment variable DISTRUN_<NAME> (dashes become underscores)\n"
    "or as a key <name> (underscores) in the config file; a flag wins over the variable, the variable over\n"
    "the file. Exit codes: 0 success, 2 usage or configuration error, 125 hung (--hang-timeout), else the\n"
    "failing worker's code.\n\n"
    "torchrun's command line works as it is: its options (--nproc_per_node, --nnodes, --node_rank,\n"
    "--master_addr, --master_port, --rdzv_backend, --rdzv_endpoint, --rdzv_id, --rdzv_conf, --standalone,\n"
    "--max_restarts, -m, --no_python, --log_dir, -r, -t, --local_ranks_filter, --role, ...) and its PET_*\n"
    "variables; every option is spelt with dashes or underscores. A command after -- runs as given. Without\n"
    "--, a first word ending in .py runs with Python (PYTHON_EXEC, else the active virtual environment's or\n"
    "conda prefix's python, else python3), as does a module after -m; --no_python runs the word itself, as\n"
    "does any first word not ending in .py.";

// The usage lines are part of the description above; CLI11's own one-line "Usage:" would be a second.
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override { return ""; }
};

// The option table's rows named on a command line (--name or --name=value): CLI11 checks each option it is
// given against all it has, so a parser of all ~70 options cost 1.1 M instructions, a third of `distrun
// --detect` (callgrind). Only the parser of --help needs them all.
std::vector<bool> NamedRows(const std::vector<std::string>& args) {
  const auto& table = OptionTable();
  std::vector<bool> named(table.size(), false);
  for (std::string_view arg : args) {
    if (arg == "--") break;
    if (!arg.starts_with("--") || arg.size() == 2) continue;
    arg.remove_prefix(2);
    arg = arg.substr(0, arg.find('='));
    for (size_t row = 0; row < table.size(); ++row) {
      if (arg == table[row].name) named[row] = true;
    }
  }
  return named;
}

// The table's options that have a short name too (mpirun's): "-H," for "hosts". Normalize turns the short
// forms into the long ones; CLI11 knows them for --help.
std::string ShortName(std::string_view name) {
  if (name == "hosts") return "-H,";
  if (name == "forward-env") return "-x,";
  return "";
}

// distrun's own flags besides the table's, and whether each takes a value.
constexpr std::pair<const char*, bool> kActionFlags[] = {{"detect", false},  {"dry-run", false},
                                                         {"version", false}, {"verbose", false},
                                                         {"help", false},    {"config", true}};

bool TakesValue(std::string_view name) {
  for (const auto& [flag, value] : kActionFlags) {
    if (name == flag) return value;
  }
  for (const OptionSpec& spec : OptionTable()) {
    if (name == spec.name) return true;
  }
  return false;
}

// "unknown option '--nproc-per-nod'; did you mean --nproc-per-node? run `distrun --help` ..."
[[noreturn]] void UnknownOption(std::string_view arg) {
  std::string name(arg.substr(0, arg.find('=')));
  std::string bare = name;
  while (bare.starts_with('-')) bare.erase(0, 1);
  std::replace(bare.begin(), bare.end(), '_', '-');
  std::vector<std::string> known = TorchrunOptionNames();
  for (const OptionSpec& spec : OptionTable()) known.emplace_back(spec.name);
  for (const auto& [flag, value] : kActionFlags) known.emplace_back(flag);
  const std::string nearest = ClosestName(bare, known);
  throw UsageError("unknown option '" + name + "'; " +
                   (nearest.empty() ? "" : "did you mean --" + nearest + "? ") +
                   "run `distrun --help` for the options, and put the command after --");
}

// The arguments in distrun's spelling (dashes in option names), torchrun's own options taken out, and where
// the command begins: at "--" (kept), or at the first word that is not an option (a "--" is put before it).
struct Normalized {
  std::vector<std::string> args;
  std::vector<TorchrunOption> torchrun;
  bool command_after_dashes = false;
};

Normalized Normalize(int argc, const char* const* argv) {
  Normalized out;
  std::optional<std::string> forwarded;  // every -x NAME[=VALUE], a line each
  int i = 1;
  auto value_of = [&](const std::string& written, std::optional<std::string> inline_value) {
    if (inline_value) return *inline_value;
    if (i + 1 >= argc || std::string_view(argv[i + 1]) == "--") {
      throw UsageError(written + " needs a value; run `distrun --help`");
    }
    return std::string(argv[++i]);
  };
  for (; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      out.command_after_dashes = true;
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') break;  // the command: torchrun's script, or a program
    const bool long_form = arg.starts_with("--");
    const size_t eq = arg.find('=');
    std::string written = arg.substr(0, eq);
    std::optional<std::string> inline_value;
    if (eq != std::string::npos) inline_value = arg.substr(eq + 1);
    std::string name = written.substr(long_form ? 2 : 1);
    if (!long_form && name.size() > 1 && (name[0] == 'r' || name[0] == 't') && !inline_value) {
      inline_value = name.substr(1);  // -r3, -t3: argparse's joined short form
      name.resize(1);
      written = "-" + name;
    }
    if (!long_form && name.size() > 1 && (name[0] == 'H' || name[0] == 'x') && !inline_value) {
      inline_value = name.substr(1);  // -Ha,b and -xNAME, as mpirun takes them
      name.resize(1);
      written = "-" + name;
    }
    std::replace(name.begin(), name.end(), '_', '-');
    if (name == "H" || name == "host") {  // Open MPI's and Horovod's spellings
      out.args.push_back("--hosts=" + value_of(written, inline_value));
      continue;
    }
    if (name == "x" || name == "forward-env") {  // repeatable: one value of lines (options.cc)
      forwarded = (forwarded ? *forwarded + "\n" : std::string()) + value_of(written, inline_value);
      continue;
    }
    if (!long_form && name != "m" && name != "r" && name != "t") {
      out.args.push_back(arg);  // -h, -v and the unknown: CLI11's
      continue;
    }
    if (std::optional<bool> takes_value = TorchrunOptionTakesValue(name)) {
      if (!*takes_value && inline_value)
        throw UsageError(written + " takes no value (got '" + *inline_value + "')");
      std::string value = *takes_value ? value_of(written, inline_value) : std::string();
      if (name == "r" || name == "t") {  // distrun's own --redirects and --tee
        out.args.push_back(std::string(name == "r" ? "--redirects=" : "--tee=") + value);
        continue;
      }
      out.torchrun.push_back({name, std::move(value), written});
      continue;
    }
    if (!long_form) UnknownOption(arg);
    out.args.push_back("--" + name + (inline_value ? "=" + *inline_value : ""));
    if (!inline_value && TakesValue(name) && i + 1 < argc && std::string_view(argv[i + 1]) != "--") {
      out.args.emplace_back(argv[++i]);  // the value, as written
    }
  }
  if (forwarded) out.args.push_back("--forward-env=" + *forwarded);
  if (i < argc) {
    out.args.emplace_back("--");
    if (out.command_after_dashes) ++i;
    for (; i < argc; ++i) out.args.emplace_back(argv[i]);
  }
  return out;
}

struct Parser {
  CLI::App app{kUsage, "distrun"};
  bool detect = false;
  bool dry_run = false;
  bool version = false;
  bool verbose = false;
  std::string config;
  std::vector<std::string> values;  // one slot per option table row
  std::vector<CLI::Option*> opts;   // nullptr: a row this parser does not know

  // `rows`: the option table's rows to know (all when empty).
  explicit Parser(const std::vector<bool>& rows = {}) {
    app.set_help_flag("-h,--help", "print this help and exit");
    app.add_flag("--detect", detect, "print the detected topology and per-worker plan, then exit");
    app.add_flag("--dry-run", dry_run, "print the plan for the command, then exit without starting it");
    app.add_flag("--version", version, "print the version and built-in features, then exit");
    app.add_flag("-v,--verbose", verbose, "distrun's own messages at debug level (--log-level debug)");
    app.add_option("--config", config, "YAML config file (default: ./distrun.yaml if present)")
        ->type_name("FILE");
    const auto& table = OptionTable();
    values.resize(table.size());
    opts.resize(table.size(), nullptr);
    for (size_t i = 0; i < table.size(); ++i) {
      if (!rows.empty() && !rows[i]) continue;
      const OptionSpec& spec = table[i];
      std::string description =
          std::string(spec.help) + " [env " + EnvNameFor(spec.name) + ", key " + ConfigKeyFor(spec.name) +
          (spec.default_value ? std::string(", default ") + spec.default_value : "") + "]";
      opts[i] = app.add_option(ShortName(spec.name) + "--" + spec.name, values[i], description)
                    ->type_name(spec.value_name)
                    ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    }
    auto formatter = std::make_shared<Formatter>();
    formatter->column_width(34);
    app.formatter(formatter);
  }
};

}  // namespace

std::string HelpText() {
  Parser p;
  return p.app.help();
}

CommandLine ParseCommandLine(int argc, const char* const* argv) {
  CommandLine cl;
  Normalized n = Normalize(argc, argv);
  cl.command_after_dashes = n.command_after_dashes;
  Parser p(NamedRows(n.args));
  // The first "--" (Normalize puts one where the command begins) starts the worker command; everything
  // after it, later "--" included, belongs to the command untouched.
  p.app.prefix_command(true);
  // CLI11 would take a "--" right after a flag as that flag's value.
  for (size_t i = 0; i + 1 < n.args.size(); ++i) {
    std::string_view arg = n.args[i];
    if (arg == "--") break;
    if (n.args[i + 1] == "--" && arg.starts_with("--") && arg.find('=') == std::string_view::npos &&
        TakesValue(arg.substr(2))) {
      throw UsageError(std::string(arg) + " needs a value before --; run `distrun --help`");
    }
  }
  auto first_unknown = [&]() -> std::optional<std::string> {
    for (const std::string& arg : n.args) {
      if (arg == "--") break;
      if (!arg.starts_with("--")) continue;
      const std::string name = arg.substr(2, arg.find('=') - 2);
      bool known = TakesValue(name);
      for (const auto& [flag, value] : kActionFlags) known = known || name == flag;
      if (!known) return arg;
    }
    return std::nullopt;
  };
  try {
    std::vector<std::string> reversed(n.args.rbegin(), n.args.rend());
    p.app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    cl.action = Action::kHelp;
    cl.help_text = HelpText();
    return cl;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (what.find("not expected") != std::string::npos || what.find("xtras") != std::string::npos) {
      if (std::optional<std::string> unknown = first_unknown()) UnknownOption(*unknown);
      throw UsageError(what + "; run `distrun --help` for the options, and put the command after --");
    }
    throw UsageError(what + "; run `distrun --help` for the expected value");
  }
  std::vector<std::string> rest = p.app.remaining();
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    UnknownOption(rest.front());
  }
  cl.command = rest;

  const auto& table = OptionTable();
  for (size_t i = 0; i < table.size(); ++i) {
    if (p.opts[i] != nullptr && p.opts[i]->count() > 0)
      cl.flags[table[i].name] = RawValue{p.values[i], std::string("--") + table[i].name};
  }
  if (p.verbose && !cl.flags.contains("log-level")) cl.flags["log-level"] = RawValue{"debug", "--verbose"};
  // torchrun's options, in distrun's: one given both ways must agree.
  TorchrunMeaning torchrun = TranslateTorchrun(n.torchrun);
  for (auto& [name, raw] : torchrun.options) {
    auto it = cl.flags.find(name);
    if (it == cl.flags.end()) {
      cl.flags[name] = raw;
    } else if (it->second.value != raw.value) {
      throw UsageError(raw.where + " and " + it->second.where + " disagree ('" + raw.value + "', '" +
                       it->second.value + "'); give one of them");
    }
  }
  cl.defaults = torchrun.defaults;
  cl.form = torchrun.form;
  if (!p.config.empty()) cl.config_path = p.config;
  int actions = int(p.detect) + int(p.dry_run) + int(p.version);
  if (actions > 1) throw UsageError("--detect, --dry-run and --version exclude each other; give one");
  if (p.version) cl.action = Action::kVersion;
  if (p.detect) cl.action = Action::kDetect;
  if (p.dry_run) cl.action = Action::kDryRun;
  if (cl.action == Action::kDetect && !cl.command.empty()) {
    throw UsageError("--detect takes no command (got '" + cl.command.front() +
                     "'); use --dry-run -- COMMAND to see the plan for a command");
  }
  return cl;
}

}  // namespace distrun
