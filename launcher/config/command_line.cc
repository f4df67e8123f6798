#include "launcher/config/command_line.h"

#include <CLI/CLI.hpp>
#include <memory>

#include "detect/errors.h"

namespace distrun {
namespace {

constexpr const char* kUsage =
    "distrun: launch and supervise distributed GPU jobs on Slurm, MPI, TPU, Kubernetes or one machine.\n\n"
    "Usage:\n"
    "  distrun [OPTIONS] -- COMMAND [ARGS...]      spawn workers for COMMAND and supervise them\n"
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
    "failing worker's code.";

// The usage lines are part of the description above; CLI11's own one-line "Usage:" would be a second.
class Formatter : public CLI::Formatter {
 public:
  std::string make_usage(const CLI::App*, std::string) const override { return ""; }
};

// The option table's rows named on a command line (--name or --name=value): CLI11 checks each option it is
// given against all it has, so a parser of all ~70 options cost 1.1 M instructions, a third of `distrun
// --detect` (callgrind). Only the parser of --help needs them all.
std::vector<bool> NamedRows(int argc, const char* const* argv) {
  const auto& table = OptionTable();
  std::vector<bool> named(table.size(), false);
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("--") || arg.size() == 2) continue;
    arg.remove_prefix(2);
    arg = arg.substr(0, arg.find('='));
    for (size_t row = 0; row < table.size(); ++row) {
      if (arg == table[row].name) named[row] = true;
    }
  }
  return named;
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
      opts[i] = app.add_option(std::string("--") + spec.name, values[i], description)
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
  Parser p(NamedRows(argc, argv));
  // The first "--" or the first word that is not an option starts the worker command; everything after
  // it, later "--" included, belongs to the command untouched.
  p.app.prefix_command(true);
  // CLI11 would take a "--" right after a flag as that flag's value.
  for (int i = 1; i + 1 < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") break;
    if (std::string_view(argv[i + 1]) == "--" && arg.starts_with("--") &&
        arg.find('=') == std::string_view::npos) {
      const std::string name(arg.substr(2));
      bool takes_value = name == "config";
      for (const OptionSpec& spec : OptionTable()) takes_value = takes_value || name == spec.name;
      if (takes_value) throw UsageError(std::string(arg) + " needs a value before --; run `distrun --help`");
    }
  }
  try {
    std::vector<std::string> reversed;
    for (int i = argc - 1; i >= 1; --i) reversed.emplace_back(argv[i]);
    p.app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    cl.action = Action::kHelp;
    cl.help_text = HelpText();
    return cl;
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    if (what.find("not expected") != std::string::npos || what.find("xtras") != std::string::npos) {
      throw UsageError(what + "; run `distrun --help` for the options, and put the command after --");
    }
    throw UsageError(what + "; run `distrun --help` for the expected value");
  }
  std::vector<std::string> rest = p.app.remaining();
  if (!rest.empty() && rest.front() == "--") {
    rest.erase(rest.begin());
  } else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
    throw UsageError("unknown option '" + rest.front() + "'; run `distrun --help` for the options");
  }
  cl.command = rest;

  const auto& table = OptionTable();
  for (size_t i = 0; i < table.size(); ++i) {
    if (p.opts[i] != nullptr && p.opts[i]->count() > 0)
      cl.flags[table[i].name] = RawValue{p.values[i], std::string("--") + table[i].name};
  }
  if (p.verbose && !cl.flags.contains("log-level")) cl.flags["log-level"] = RawValue{"debug", "--verbose"};
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
