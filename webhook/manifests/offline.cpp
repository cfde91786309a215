// The offline mutate/check engine (see offline.h).
#include "manifests/offline.h"

#include <algorithm>
#include <string>

#include "inject/json_fields.h"
#include "manifests/surgical.h"
#include "manifests/templates.h"
#include "manifests/yaml_doc.h"
#include "sizing/quantity.h"
#include "base/text.h"

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
  std::string out;
  if (text.starts_with('%')) {
    // Directives and the "---" line that ends them are kept as they are.
    auto sep = text.find("\n---");
    auto nl = sep == std::string::npos ? std::string::npos : text.find('\n', sep + 1);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    out = text.substr(0, pos);
    if (!out.empty() && out.back() != '\n') out += '\n';
  } else if (text.compare(0, 3, "---") == 0) {
    had_separator = true;
    auto nl = text.find('\n');
    // Content after "--- " on the same line (e.g. "--- # note") is dropped with the line.
    pos = nl == std::string::npos ? text.size() : nl + 1;
  }
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

std::string TemplateReport::summary_planned() const {
  if (result.action == inject::Action::kInjected) return "would inject " + sizing::format_quantity(result.size());
  return result.summary;
}

std::string TemplateReport::summary_done() const {
  const auto& r = result;
  if (r.action == inject::Action::kInjected) return "injected " + sizing::format_quantity(r.size());
  if (r.action == inject::Action::kUpdated && r.stale)
    return "updated to " + sizing::format_quantity(r.size()) + " (was " + r.summary + ")";
  return r.summary;
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
  release_held(false);
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

void OfflineRunner::write(const std::string& text, const YamlDocument* doc) {
  if (text.empty()) return;
  wrote_any_ = true;
  if (text.back() != '\n') {
    // The last document of a file without a final newline: held back until it is known whether
    // another file follows (then it needs one) or not (then it stays byte for byte).
    held_ = text;
    held_fixed_ = doc ? strip_trailing_block_scalar(*doc, text) : std::nullopt;
    return;
  }
  out_ << text;
}

void OfflineRunner::release_held(bool more_follows) {
  if (held_.empty()) return;
  if (more_follows) {
    out_ << (held_fixed_ ? *held_fixed_ : held_) << "\n";
  } else {
    out_ << held_;
  }
  held_.clear();
  held_fixed_.reset();
}

Status OfflineRunner::process(const std::string& file, std::istream& in) {
  DocumentReader reader(in);
  RawDocument raw;
  int index = 0;
  while (reader.next(raw)) {
    ++index;
    if (index == 1 && format_ == OutputFormat::kYaml && wrote_any_) {
      // Files are concatenated into one stream: the previous file may lack a final newline and
      // this one may not open with "---"; without both, two documents would read as one.
      release_held(true);
      // Directives may only follow a document that "..." ends; otherwise a "---" line separates.
      if (raw.text.starts_with('%')) out_ << "...\n";
      else if (raw.text.compare(0, 3, "---") != 0) out_ << "---\n";
    }
    if (auto done = process_document(file, index, raw); !done) return done;
  }
  return Ok{};
}

Status OfflineRunner::process_document(const std::string& file, int index, const RawDocument& raw) {
  auto where = [&](int rel_line) {
    return file + ":" + std::to_string(rel_line > 0 ? raw.first_line + rel_line - 1 : raw.first_line);
  };
  if (auto parsed = parse_document(raw.text, ydoc_); !parsed)
    return Status::failure(where(parsed.line()) + ": " + parsed.error());
  const YamlNode* node = ydoc_.root;
  if (!node) {
    if (format_ == OutputFormat::kYaml) write(raw.text, &ydoc_);
    return Ok{};
  }
  if (node->kind != YamlNode::Kind::kMap) {
    return Status::failure(where(node->line) + ": document " + std::to_string(index) + " is " + type_name(*node) +
                           ", expected a Kubernetes object (a mapping)");
  }
  node_budget_ = node_budget(raw.text);
  auto doc = to_json(node, node_budget_);
  if (!doc) return Status::failure(where(doc.line()) + ": " + doc.error());
  std::vector<TemplateReport> reports;
  for (const auto& ref : find_templates(*doc)) reports.push_back(report_template(file, index, raw, ref));
  if (format_ != OutputFormat::kNone) {
    // Written out, the document would pass on what kubectl refuses: mutate stops instead.
    for (const auto& rep : reports)
      if (!rep.rejected.empty()) {
        return Status::failure(rep.file + ":" + std::to_string(rep.rejected.front().first) + ": " +
                               rep.rejected.front().second);
      }
  }
  const bool changed = std::any_of(reports.begin(), reports.end(), [](const auto& r) { return r.result.mutated(); });
  Status written = Ok{};
  if (!changed) {
    if (format_ == OutputFormat::kYaml) write(raw.text, &ydoc_);
    if (format_ == OutputFormat::kJson) written = write_json_tree(where);
  } else if (format_ != OutputFormat::kNone) {
    written = write_changed(raw, *doc, reports, where);
  }
  for (auto& rep : reports) {
    if (sink_) sink_(rep);
    else reports_.push_back(std::move(rep));
  }
  return written;
}

// The engine's call on one template, with where it is in the file.
TemplateReport OfflineRunner::report_template(const std::string& file, int index, const RawDocument& raw,
                                              const TemplateRef& ref) const {
  TemplateReport rep;
  rep.file = file;
  rep.document = index;
  const YamlNode* tnode = resolve(ydoc_.root, ref.pointer);
  rep.line = raw.first_line + (tnode ? tnode->line : ydoc_.root->line) - 1;
  rep.kind = ref.kind;
  rep.name = ref.name;
  rep.path = ref.path;
  rep.pointer = ref.pointer;
  rep.namespace_name = ref.namespace_name;
  rep.training_kind = ref.training_kind;
  rep.owner_procs = ref.owner_procs;
  const json& tmpl = *ref.node;  // find_templates(doc) found it
  rep.result = inject::inject_pod(tmpl, cfg_, {.assume_training = ref.training_kind, .owner_procs = ref.owner_procs});
  if (keep_objects_) rep.object = tmpl;
  check_annotation_types(tmpl, rep, raw.first_line);
  rep.warning_lines = warning_lines(rep, raw.first_line);
  return rep;
}

int OfflineRunner::annotation_line(const TemplateReport& rep, const std::string& key, int first_line) const {
  const YamlNode* ann = resolve(ydoc_.root, rep.pointer + "/metadata/annotations");
  if (ann && !key.empty() && ann->kind == YamlNode::Kind::kMap) {
    for (const auto& [k, v] : ann->pairs)
      if (k->kind == YamlNode::Kind::kScalar && k->value == key) return first_line + k->line - 1;
  }
  return rep.line;
}

std::vector<int> OfflineRunner::warning_lines(const TemplateReport& rep, int first_line) const {
  std::vector<int> lines;
  for (const auto& about : rep.result.warning_about) lines.push_back(annotation_line(rep, about, first_line));
  return lines;
}

// Annotation values must be strings; YAML reads `64` and `true` as a number and a bool, and the
// API server refuses the object. A shmguard.io one is a finding (its value is what shmguard sized
// by), any other a warning.
void OfflineRunner::check_annotation_types(const json& tmpl, TemplateReport& rep, int first_line) const {
  const json* md = inject::object_at(tmpl, "metadata");
  const json* ann = md ? inject::object_at(*md, "annotations") : nullptr;
  if (!ann) return;
  for (const auto& [key, value] : ann->items()) {
    if (!value.is_number() && !value.is_boolean()) continue;
    std::string msg = "annotation " + printable(key, 80) + ": " + value.dump() + " is " +
                      (value.is_boolean() ? "a bool" : "a number") +
                      "; kubectl would reject it (annotation values must be strings): quote it";
    if (key.starts_with("shmguard.io/")) rep.rejected.emplace_back(annotation_line(rep, key, first_line), std::move(msg));
    else rep.result.warn(std::move(msg), key);
  }
}

Status OfflineRunner::write_json_tree(const std::function<std::string(int)>& where) {
  auto text = emit_json(ydoc_.root, node_budget_ * 2, 0);
  if (!text) return Status::failure(where(text.line()) + ": " + text.error());
  write_json_document(*text);
  return Ok{};
}

// The document's own text with the templates' lines added, verified by reading it back as the
// patched object; a failure says why (with the anchor's line for an anchor conflict).
Result<std::string> OfflineRunner::surgical_edit(const RawDocument& raw, json& doc,
                                                  const std::vector<TemplateReport>& reports) {
  std::vector<TemplatePatch> patches;
  json combined = json::array();
  for (const auto& rep : reports) {
    if (!rep.result.mutated()) continue;
    patches.push_back({rep.pointer, &rep.result.patch});
    for (auto op : rep.result.patch) {
      op["path"] = rep.pointer + op["path"].get<std::string>();
      combined.push_back(std::move(op));
    }
  }
  auto edit = edit_in_place(raw.text, ydoc_, patches);
  if (!edit) return edit;
  doc.patch_inplace(combined);  // `doc` is not needed unpatched any more
  if (auto parsed = parse_document(*edit, check_doc_); !parsed)
    return Result<std::string>::failure("the edited text does not parse: " + parsed.error());
  if (!equals_json(check_doc_.root, doc, node_budget(*edit)))
    return Result<std::string>::failure("the edited text does not read back as the patched object");
  return edit;
}

// The re-emitter: the patched tree written out in full, leading comments and directives kept.
Status OfflineRunner::reemit(const RawDocument& raw, const std::vector<TemplateReport>& reports, const std::function<std::string(int)>& where) {
  if (!ydoc_.unshare(node_budget_))
    return Status::failure(where(0) + ": document expands to too many nodes (alias expansion?)");
  for (const auto& rep : reports) {
    if (!rep.result.mutated()) continue;
    if (auto applied = apply_patch(ydoc_, rep.pointer, rep.result.patch); !applied)
      return Status::failure(where(0) + ": internal error applying the patch to " + rep.path + ": " + applied.error());
  }
  if (format_ == OutputFormat::kJson) return write_json_tree(where);
  auto text = emit_yaml(ydoc_.root, node_budget_ * 2);
  if (!text) return Status::failure(where(text.line()) + ": " + text.error());
  bool had_sep = false;
  std::string head = leading_comments(raw.text, had_sep);
  std::string body = (had_sep ? std::string("---\n") : std::string()) + head + *text;
  if (raw.text.find("\r\n") != std::string::npos) {
    std::erase(body, '\r');
    body = to_crlf(body);
  }
  write(body);
  return Ok{};
}

Status OfflineRunner::write_changed(const RawDocument& raw, json& doc, std::vector<TemplateReport>& reports,
                                    const std::function<std::string(int)>& where) {
  if (format_ == OutputFormat::kYaml) {
    auto edit = surgical_edit(raw, doc, reports);
    if (edit) {
      write(*edit, &check_doc_);
      return Ok{};
    }
    if (edit.line() > 0 && !allow_reformat_) {
      return Status::failure(where(edit.line()) + ": " + edit.error() +
                             "; nothing was written (--allow-reformat re-emits the document with the anchor expanded)");
    }
    const std::string why = edit.line() > 0 ? edit.error() + " at " + where(edit.line()) : edit.error();
    for (auto& rep : reports)
      if (rep.result.mutated()) rep.reemitted_because = why;
  }
  return reemit(raw, reports, where);
}

}  // namespace shmguard::manifests
