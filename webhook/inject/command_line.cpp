// What a container runs, and the tokenizer of its command lines (see command_line.h).
#include "inject/command_line.h"

#include <algorithm>
#include <array>
#include <cctype>

#include "base/text.h"
#include "base/json_fields.h"
#include "sizing/quantity.h"

namespace shmguard::inject {
namespace {

using nlohmann::json;

constexpr std::string_view kSeparator = ";";  // what shell_words puts between simple commands

bool is_python(const std::string& word) {
  const std::string_view b = program_name(word);
  return b.starts_with("python") && b.find_first_not_of("0123456789.", 6) == std::string_view::npos;
}

bool is_shell(const std::string& word) {
  const std::string_view b = program_name(word);
  return b == "sh" || b == "bash" || b == "dash" || b == "ash" || b == "zsh";
}

bool is_assignment(const std::string& w) {
  const auto eq = w.find('=');
  return eq != std::string::npos && eq > 0 && w[0] != '-' &&
         w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == eq;
}

// Words before the program itself: VAR=value, and wrappers that run the rest as a command.
std::vector<std::string> unwrap(std::vector<std::string> words) {
  std::size_t i = 0;
  while (i < words.size()) {
    const std::string_view b = program_name(words[i]);
    if (is_assignment(words[i]) || b == "exec" || b == "env" || b == "nohup" || b == "time") ++i;
    else break;
  }
  words.erase(words.begin(), words.begin() + static_cast<std::ptrdiff_t>(i));
  // python -mX is python -m X.
  if (!words.empty() && is_python(words[0]))
    for (std::size_t j = 1; j < words.size(); ++j)
      if (words[j].size() > 2 && words[j].starts_with("-m")) {
        words.insert(words.begin() + static_cast<std::ptrdiff_t>(j) + 1, words[j].substr(2));
        words[j] = "-m";
        break;
      }
  return words;
}

// The simple commands of a shell script, each unwrapped.
void add_script(const std::string& script, CommandLine proto, std::vector<CommandLine>& out) {
  std::vector<std::string> cur;
  auto flush = [&] {
    if (auto w = unwrap(std::move(cur)); !w.empty()) {
      proto.words = std::move(w);
      out.push_back(proto);
    }
    cur.clear();
  };
  for (auto& w : shell_words(script)) {
    if (w == kSeparator) flush();
    else cur.push_back(std::move(w));
  }
  flush();
}

// torchrun's own options (underscores and dashes alike): args opening with one of them, and naming a
// script, are torchrun's, run by an image whose entrypoint is torchrun (torchelastic's samples).
bool is_torchrun_option(std::string_view word) {
  static constexpr std::string_view kOptions[] = {
      "--nnodes",       "--nproc-per-node", "--rdzv-backend", "--rdzv-endpoint", "--rdzv-id",
      "--rdzv-conf",    "--standalone",     "--max-restarts", "--monitor-interval", "--start-method",
      "--node-rank",    "--master-addr",    "--master-port",  "--local-addr",    "--role",
      "--log-dir",      "--redirects",      "--tee",          "--no-python",     "--run-path",
  };
  std::string name(word.substr(0, word.find('=')));
  std::replace(name.begin(), name.end(), '_', '-');
  return std::find(std::begin(kOptions), std::end(kOptions), name) != std::end(kOptions);
}

bool opens_with_torchrun_flag(const std::vector<std::string>& argv) {
  if (argv.empty() || !is_torchrun_option(argv[0])) return false;
  return std::any_of(argv.begin(), argv.end(), [](const std::string& w) { return w.ends_with(".py"); });
}

void add_container(const json& c, std::vector<CommandLine>& out) {
  std::vector<std::string> argv;
  std::size_t from_command = 0;
  for (const char* field : {"command", "args"}) {
    const json* list = child(c, field);
    if (!list || !list->is_array()) continue;
    for (const auto& item : *list)
      if (item.is_string()) argv.push_back(item.get<std::string>());
    if (std::string_view(field) == "command") from_command = argv.size();
  }
  if (argv.empty()) return;
  CommandLine proto;
  proto.container = &c;
  proto.container_name = printable(str_field(c, "name"));
  // sh -c 'script' (also -lc, -ec, -xc ..., and `bash -lc -- 'script'`, KubeRay's samples' form,
  // where `--` ends the options): the script's commands.
  if (is_shell(argv[0])) {
    for (std::size_t i = 1; i + 1 < argv.size(); ++i) {
      if (argv[i].size() < 2 || argv[i][0] != '-') break;
      if (argv[i] != "--" && argv[i].find('c') != std::string::npos) {
        std::size_t script = i + 1;
        if (argv[script] == "--" && script + 1 < argv.size()) ++script;
        proto.field = script < from_command ? "command" : "args";
        add_script(argv[script], proto, out);
        return;
      }
    }
  }
  proto.field = from_command > 0 ? "command" : "args";
  proto.entrypoint_launcher = from_command == 0 && opens_with_torchrun_flag(argv);
  proto.words = unwrap(std::move(argv));
  if (!proto.words.empty()) out.push_back(std::move(proto));
}

// A command line's first word as the patterns compare it, worked out once for all of them.
struct Program {
  explicit Program(const std::string& word) : name(program_name(word)), python(is_python(word)) {}
  std::string_view name;
  bool python;
};

// The words of `pattern` ("python -m torch.distributed.run") start `line` (whose first word is
// `program`): its first word is the program (any python3.x for "python"), the others follow it
// in order, next to each other.
bool starts(const std::vector<std::string>& line, const Program& program, const std::vector<std::string>& pattern) {
  if (pattern.empty() || line.empty()) return false;
  if (!(pattern[0] == "python" ? program.python : program.name == pattern[0])) return false;
  if (pattern.size() == 1) return true;
  auto it = std::search(line.begin() + 1, line.end(), pattern.begin() + 1, pattern.end());
  return it != line.end();
}

bool is_launcher_line(const CommandLine& l, const std::vector<std::vector<std::string>>& patterns) {
  if (l.words.empty()) return false;
  if (l.entrypoint_launcher) return true;
  const Program program(l.words[0]);
  if (program.python) return true;
  return std::any_of(patterns.begin(), patterns.end(), [&](const auto& p) { return starts(l.words, program, p); });
}

struct Flag {
  std::string_view name;
  LoaderFlags::Value LoaderFlags::*field;
};
// Every spelling of the three DataLoader settings a command line passes: PyTorch's examples' own
// (the ImageNet example's -j and -b among them, on Python and launcher lines only), and Hugging Face
// Trainer's (per_device_train_batch_size is per process, as the formula's batch is).
constexpr Flag kFlags[] = {
    {"--batch-size", &LoaderFlags::batch_size},
    {"--batch_size", &LoaderFlags::batch_size},
    {"--per_device_train_batch_size", &LoaderFlags::batch_size},
    {"--per-device-train-batch-size", &LoaderFlags::batch_size},
    {"-b", &LoaderFlags::batch_size},
    {"--num-workers", &LoaderFlags::num_workers},
    {"--num_workers", &LoaderFlags::num_workers},
    {"--workers", &LoaderFlags::num_workers},
    {"--dataloader_num_workers", &LoaderFlags::num_workers},
    {"--dataloader-num-workers", &LoaderFlags::num_workers},
    {"-j", &LoaderFlags::num_workers},
    {"--prefetch-factor", &LoaderFlags::prefetch_factor},
    {"--prefetch_factor", &LoaderFlags::prefetch_factor},
    {"--dataloader_prefetch_factor", &LoaderFlags::prefetch_factor},
    {"--dataloader-prefetch-factor", &LoaderFlags::prefetch_factor},
};

// `-j8`: argparse's short option with its value attached (digits only, so `-bind` is no `-b`).
std::optional<std::string> short_flag_in(const std::vector<std::string>& words, std::size_t from, std::string_view flag) {
  for (std::size_t i = from; i < words.size() && words[i] != kSeparator; ++i)
    if (words[i].size() > 2 && words[i].starts_with(flag) &&
        words[i].find_first_not_of("0123456789", 2) == std::string::npos)
      return words[i].substr(2);
  return std::nullopt;
}

// The value of `flag` on a command line, env references resolved.
std::optional<std::string> flag_value(const CommandLine& l, std::string_view flag) {
  auto v = flag_in(l.words, l.entrypoint_launcher ? 0 : 1, flag);
  if (!v && flag.size() == 2) v = short_flag_in(l.words, l.entrypoint_launcher ? 0 : 1, flag);
  return v ? std::optional<std::string>(expand_env(*v, *l.container)) : std::nullopt;
}

// The configured launchers, each split into its words. Every pod is checked against the same
// config, so each thread keeps its last split, compared by content (a reloaded config is split
// again): splitting was a tenth of recognising a pod.
const std::vector<std::vector<std::string>>& split_patterns(const std::vector<std::string>& launchers) {
  thread_local std::vector<std::string> split_from;
  thread_local std::vector<std::vector<std::string>> words;
  if (split_from != launchers) {  // both start empty: an empty list splits into nothing
    words.clear();
    for (const auto& l : launchers) words.push_back(shell_words(l));
    split_from = launchers;
  }
  return words;
}

// Not a quote, a backslash, a command separator or a space: what shell_words copies as it is.
bool plain_shell_char(char c) {
  static constexpr auto kPlain = [] {
    std::array<bool, 256> t{};
    for (int i = 0; i < 256; ++i) t[static_cast<std::size_t>(i)] = true;
    for (unsigned char x : std::string_view("'\"\\;&|\n \t\v\f\r")) t[x] = false;
    return t;
  }();
  return kPlain[static_cast<unsigned char>(c)];
}
}  // namespace

std::vector<std::string> shell_words(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  auto flush = [&] {
    if (in_word) out.push_back(std::move(cur));
    cur.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '\'') {
      const auto end = std::min(s.find('\'', i + 1), s.size());
      cur.append(s.substr(i + 1, end - i - 1));
      in_word = true;
      i = end;
    } else if (c == '"') {
      for (++i; i < s.size() && s[i] != '"'; ++i) {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        cur += s[i];
      }
      in_word = true;
    } else if (c == '\\' && i + 1 < s.size()) {
      if (s[++i] != '\n') {  // backslash-newline joins lines
        cur += s[i];
        in_word = true;
      }
    } else if (c == '#' && !in_word) {
      while (i + 1 < s.size() && s[i + 1] != '\n') ++i;
    } else if (c == ';' || c == '&' || c == '|' || c == '\n') {
      flush();
      if (out.empty() || out.back() != kSeparator) out.emplace_back(kSeparator);
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      flush();
    } else {
      // A run of characters that are none of the above joins the word at once ('#' inside a word is one).
      std::size_t end = i + 1;
      while (end < s.size() && plain_shell_char(s[end])) ++end;
      cur.append(s.substr(i, end - i));
      in_word = true;
      i = end - 1;
    }
  }
  flush();
  return out;
}


bool runs_launcher_entrypoint(const json& container) {
  const json* command = child(container, "command");
  if (command && command->is_array() && !command->empty()) return false;
  const json* args = child(container, "args");
  if (!args || !args->is_array()) return false;
  std::vector<std::string> argv;
  for (const auto& a : *args)
    if (a.is_string()) argv.push_back(a.get<std::string>());
  return opens_with_torchrun_flag(argv);
}

std::string_view program_name(std::string_view word) {
  const auto slash = word.rfind('/');
  return slash == std::string_view::npos ? word : word.substr(slash + 1);
}

std::optional<std::string> flag_in(const std::vector<std::string>& words, std::size_t from, std::string_view flag) {
  for (std::size_t i = from; i < words.size() && words[i] != kSeparator; ++i) {
    const std::string& w = words[i];
    if (!w.starts_with(flag)) continue;
    if (w.size() == flag.size() && i + 1 < words.size() && words[i + 1] != kSeparator) return words[i + 1];
    if (w.size() > flag.size() && w[flag.size()] == '=') return w.substr(flag.size() + 1);
  }
  return std::nullopt;
}

bool runs_only_mpi(const std::vector<CommandLine>& lines, const std::vector<std::string>& launchers) {
  const auto& patterns = split_patterns(launchers);
  bool mpi = false;
  for (const auto& l : lines) {
    const std::string_view prog = program_name(l.words[0]);
    if (prog == "mpirun" || prog == "mpiexec" || prog == "horovodrun") mpi = true;
    else if (is_launcher_line(l, patterns)) return false;  // Python or a launcher of its own
  }
  return mpi;
}

std::vector<CommandLine> command_lines(const json& spec) {
  std::vector<CommandLine> out;
  const json* containers = child(spec, "containers");
  if (!containers || !containers->is_array()) return out;
  for (const auto& c : *containers)
    if (c.is_object()) add_container(c, out);
  return out;
}

std::string env_reference(const std::string& raw) {
  std::string name;
  if (raw.size() > 3 && raw.starts_with("$(") && raw.back() == ')') name = raw.substr(2, raw.size() - 3);
  else if (raw.size() > 3 && raw.starts_with("${") && raw.back() == '}') name = raw.substr(2, raw.size() - 3);
  else if (raw.size() > 1 && raw[0] == '$') name = raw.substr(1);
  const bool identifier = !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
                          name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") ==
                              std::string::npos;
  return identifier ? name : std::string();
}

std::optional<std::string> env_literal(const json& container, std::string_view name) {
  const json* env = child(container, "env");
  if (!env || !env->is_array()) return std::nullopt;
  for (const auto& e : *env) {
    if (str_field(e, "name") != name) continue;
    const json* v = child(e, "value");
    // Users write `value: 4` in manifests (the API server wants a string; kubectl's YAML gives one).
    if (v && v->is_string()) return v->get<std::string>();
    if (v && (v->is_number_integer() || v->is_number_unsigned())) return v->dump();
    return std::nullopt;
  }
  return std::nullopt;
}

std::string expand_env(const std::string& raw, const json& container) {
  const std::string name = env_reference(raw);
  if (name.empty()) return raw;
  return env_literal(container, name).value_or(raw);
}

std::string launcher_rule(const std::vector<CommandLine>& lines, const std::vector<std::string>& launchers) {
  const auto& patterns = split_patterns(launchers);
  for (const auto& l : lines) {
    if (l.words.empty()) continue;
    if (l.entrypoint_launcher) return "torchrun (image entrypoint) in " + l.field;
    const Program program(l.words[0]);
    for (std::size_t i = 0; i < patterns.size(); ++i)
      if (starts(l.words, program, patterns[i])) return printable(launchers[i], 60) + " in " + l.field;
  }
  for (const auto& l : lines) {
    if (!is_launcher_line(l, patterns)) continue;
    for (const auto& flag : kFlags) {
      if (flag.field != &LoaderFlags::num_workers) continue;
      auto v = flag_value(l, flag.name);
      auto n = v ? sizing::parse_count(*v) : std::nullopt;
      if (n && *n > 0) return std::string(flag.name) + " " + std::to_string(*n) + " in " + l.field;
    }
  }
  return "";
}

LoaderFlags loader_flags(const std::vector<CommandLine>& lines, const std::vector<std::string>& launchers) {
  LoaderFlags f;
  const auto& patterns = split_patterns(launchers);
  for (const auto& l : lines) {
    if (!is_launcher_line(l, patterns)) continue;  // a sidecar's `--workers` is not a DataLoader's
    bool any = false;
    for (const auto& flag : kFlags) {
      if ((f.*flag.field).n) continue;
      auto v = flag_value(l, flag.name);
      if (!v) continue;
      if (auto n = sizing::parse_count(*v)) {
        f.*flag.field = {*n, std::string(flag.name) + " " + std::to_string(*n)};
        any = true;
      } else if (flag.name.size() > 2) {  // `python -b script.py`: Python's own -b, not a batch size
        const std::string var = env_reference(*v);
        f.warnings.push_back({std::string(flag.name) + " \"" + printable(*v) + "\" in container " + l.container_name +
                                  (var.empty() ? " is not a whole number"
                                               : " is the variable " + printable(var) +
                                                     ", which the container's env does not set to a value") +
                                  "; not used for sizing",
                              std::string(flag.name)});
      }
    }
    if (any) break;
  }
  return f;
}

}  // namespace shmguard::inject
