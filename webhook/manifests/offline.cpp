// The offline mutate/check engine (see offline.h).
#include "manifests/offline.h"

#include <string>

#include "manifests/templates.h"
#include "manifests/yaml_doc.h"
#include "sizing/quantity.h"

namespace shmguard::manifests {
namespace {

using nlohmann::json;

// Alias bombs and oversized documents fail instead of expanding without bound.
std::size_t node_budget(const std::string& text) { return text.size() * 16 + 4096; }

const char* type_name(const YamlNode& n) {
  switch (n.kind) {
    case YamlNode::Kind::kSequence: return "a list";
    case YamlNode::Kind::kScalar: return "a scalar";
    default: return "not a mapping";
  }
}

// Leading comment and blank lines of a document (after its "---" line), kept on rewrite.
std::string leading_comments(const std::string& text, bool& had_separator) {
  std::size_t pos = 0;
  had_separator = false;
  if (text.compare(0, 3, "---") == 0) {
    had_separator = true;
    auto nl = text.find('\n');
    // Content after "--- " on the same line (e.g. "--- # note") is dropped with the line.
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
  std::string out;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos + 1);
    auto first = line.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && line[first] != '#') break;
    out += line;
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  return out;
}

std::string to_crlf(const std::string& s) {
  std::string out;
  out.reserve(s.size() + s.size() / 16);
  for (char c : s) {
    if (c == '\n') out += '\r';
    out += c;
  }
  return out;
}

}  // namespace

std::string TemplateReport::decision_text(bool mutate_wording) const {
  using inject::Action;
  const auto& r = result;
  switch (r.action) {
    case Action::kInjected:
      return (mutate_wording ? "injected " : "would inject ") + sizing::format_quantity(r.size());
    case Action::kUserManaged:
      return r.summary;
    case Action::kSkipped:
      break;
  }
  return r.summary;
}

bool TemplateReport::missing_shm() const {
  return result.action == inject::Action::kInjected || result.too_small;
}

json TemplateReport::to_json() const {
  json j = {{"file", file},         {"document", document},   {"line", line},
            {"kind", kind},         {"name", name},           {"template", path},
            {"reason", result.reason}, {"because", result.because},
            {"decision", decision_text(false)}, {"missing", missing_shm()},
            {"warnings", result.warnings}};
  if (result.sizing) {
    j["sizeLimit"] = sizing::format_quantity(result.sizing->bytes);
    j["bytes"] = result.sizing->bytes;
    j["sizing"] = result.sizing->explanation;
  }
  if (result.existing_size) j["existingSizeLimit"] = sizing::format_quantity(*result.existing_size);
  return j;
}

void OfflineRunner::write_json_document(const std::string& doc) {
  // JSON strings never hold a raw newline, so re-indenting line starts is safe.
  std::string text;
  for (char c : doc) {
    text += c;
    if (c == '\n') text += "    ";
  }
  ++json_docs_;
  if (json_docs_ == 1) {
    first_json_ = text;
    return;
  }
  if (json_docs_ == 2) {
    out_ << "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": [\n    " << first_json_;
    first_json_.clear();
  }
  out_ << ",\n    " << text;
}

void OfflineRunner::finish() {
  if (format_ != OutputFormat::kJson) return;
  if (json_docs_ == 0) {
    out_ << "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",\n  \"items\": []\n}\n";
  } else if (json_docs_ == 1) {
    std::string single;
    for (std::size_t i = 0; i < first_json_.size(); ++i) {
      single += first_json_[i];
      if (first_json_[i] == '\n') i += 4;  // undo the List indentation
    }
    out_ << single << "\n";
  } else {
    out_ << "\n  ]\n}\n";
  }
}

bool OfflineRunner::process(const std::string& file, std::istream& in, std::string& err) {
  DocumentReader reader(in);
  RawDocument raw;
  int index = 0;
  while (reader.next(raw)) {
    ++index;
    YamlError yerr;
    auto where = [&](int rel_line) {
      return file + ":" + std::to_string(rel_line > 0 ? raw.first_line + rel_line - 1 : raw.first_line);
    };
    if (!parse_document(raw.text, ydoc_, yerr)) {
      err = where(yerr.line) + ": invalid YAML: " + yerr.message;
      return false;
    }
    const YamlNode* node = ydoc_.root;
    if (!node) {
      if (format_ == OutputFormat::kYaml) out_ << raw.text;
      continue;
    }
    if (node->kind != YamlNode::Kind::kMap) {
      err = where(node->line) + ": document " + std::to_string(index) + " is " + type_name(*node) +
            ", expected a Kubernetes object (a mapping)";
      return false;
    }
    auto doc = to_json(node, node_budget(raw.text), yerr);
    if (!doc) {
      err = where(yerr.line) + ": " + yerr.message;
      return false;
    }
    bool changed = false;
    for (const auto& ref : find_templates(*doc)) {
      TemplateReport rep;
      rep.file = file;
      rep.document = index;
      rep.line = raw.first_line;
      rep.kind = ref.kind;
      rep.name = ref.name;
      rep.path = ref.path;
      rep.pointer = ref.pointer;
      inject::InjectOptions opts;
      opts.assume_training = ref.training_kind;
      opts.build_patched = false;
      rep.result = inject::inject_pod(doc->at(json::json_pointer(ref.pointer)), cfg_, opts);
      if (rep.result.mutated() && format_ != OutputFormat::kNone) {
        if (!ydoc_.unshare(node_budget(raw.text))) {
          err = where(0) + ": document expands to too many nodes (alias expansion?)";
          return false;
        }
        std::string perr;
        if (!apply_patch(ydoc_, ref.pointer, rep.result.patch, perr)) {
          err = where(0) + ": internal error applying the patch to " + ref.path + ": " + perr;
          return false;
        }
        changed = true;
      }
      if (sink_) {
        sink_(rep);
      } else {
        reports_.push_back(std::move(rep));
      }
    }
    if (format_ == OutputFormat::kYaml) {
      if (!changed) {
        out_ << raw.text;
        continue;
      }
      auto text = emit_yaml(ydoc_.root, node_budget(raw.text) * 2, yerr);
      if (!text) {
        err = where(yerr.line) + ": " + yerr.message;
        return false;
      }
      bool had_sep = false;
      std::string head = leading_comments(raw.text, had_sep);
      std::string body = (had_sep ? std::string("---\n") : std::string()) + head + *text;
      if (raw.text.find("\r\n") != std::string::npos) {
        std::erase(body, '\r');
        body = to_crlf(body);
      }
      out_ << body;
    } else if (format_ == OutputFormat::kJson) {
      auto text = emit_json(ydoc_.root, node_budget(raw.text) * 2, 0, yerr);
      if (!text) {
        err = where(yerr.line) + ": " + yerr.message;
        return false;
      }
      write_json_document(*text);
    }
  }
  return true;
}

}  // namespace shmguard::manifests
