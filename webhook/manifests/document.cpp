// One document, worked on apart from the stream (see document.h).
#include "manifests/document.h"

#include <algorithm>
#include <string>

#include "base/assert.h"
#include "base/text.h"
#include "base/json_fields.h"
#include "manifests/edit_plan.h"
#include "manifests/read_back.h"
#include "manifests/surgical.h"
#include "manifests/trainjob.h"
#include "sizing/quantity.h"

namespace shmguard::manifests {
namespace {

using nlohmann::json;

const char* type_name(const YamlNode& n) {
  switch (n.kind) {
    case YamlNode::Kind::kSequence: return "a list";
    case YamlNode::Kind::kScalar: return "a scalar";
    default: return "not a mapping";
  }
}

// What a YAML syntax error at `line` (1-based) of `text` most likely is, for the message: an
// unrendered Helm template, or a tab where YAML wants spaces; "" when neither.
std::string syntax_hint(const std::string& text, int line) {
  std::size_t start = 0;
  for (int n = 1; n < line && start != std::string::npos; ++n) {
    start = text.find('\n', start);
    if (start != std::string::npos) ++start;
  }
  const std::string here = start == std::string::npos ? "" : text.substr(start, text.find('\n', start) - start);
  if (here.find("{{") != std::string::npos || text.find("{{") != std::string::npos)
    return " (this looks like an unrendered Helm template: run `helm template` and check its output)";
  if (here.find('\t') != std::string::npos) return " (a tab character: YAML indents with spaces only)";
  return "";
}

using Repeats = std::vector<std::pair<int, std::string>>;  // (line of the repeat, message)

// A key written twice in one mapping: kubectl keeps the last value without a word (and so does
// shmguard), so the first is lost. Each repeat's line once.
void note_repeat(const YamlNode* key, const YamlNode* first, int first_line, Repeats& out) {
  if (std::any_of(out.begin(), out.end(), [&](const auto& o) { return o.first == key->line; })) return;
  out.emplace_back(key->line, "key \"" + printable(key->value, 80) + "\" given twice in one mapping (also at line " +
                                  std::to_string(first_line + first->line - 1) +
                                  "): kubectl keeps this last value and drops the first");
}

// The repeated keys at or below `node`, by a walk that follows aliases (a mapping an alias shares
// may sit anywhere in the document); it stops after `budget` nodes.
void repeats_by_walk(const YamlNode* node, int first_line, std::size_t& budget, Repeats& out) {
  if (!node || budget == 0) return;
  --budget;
  if (node->kind == YamlNode::Kind::kMap) {
    for (std::size_t i = 0; i < node->pairs.size(); ++i) {
      const YamlNode* k = node->pairs[i].first;
      for (std::size_t j = 0; j < i; ++j)
        if (node->pairs[j].first->value == k->value) {
          note_repeat(k, node->pairs[j].first, first_line, out);
          break;
        }
      repeats_by_walk(node->pairs[i].second, first_line, budget, out);
    }
  } else if (node->kind == YamlNode::Kind::kSequence) {
    for (const YamlNode* item : node->items) repeats_by_walk(item, first_line, budget, out);
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

// A YAML text to write, with its stripped form when it has no final newline (see DocumentOutcome).
void set_text(DocumentOutcome& out, std::string text, const YamlDocument* doc) {
  if (!text.empty() && text.back() != '\n' && doc) out.text_fixed = strip_trailing_block_scalar(*doc, text);
  out.text = std::move(text);
}

}  // namespace

std::string TemplateReport::summary_planned() const {
  if (result.action == inject::Action::kInjected) return "would inject " + sizing::format_quantity(result.size());
  return result.summary;
}

std::string TemplateReport::summary_done() const {
  const auto& r = result;
  if (r.mutated() && !not_written.empty()) return "not written: " + summary_planned() + " (" + not_written + ")";
  if (r.action == inject::Action::kInjected) return "injected " + sizing::format_quantity(r.size());
  if (r.action == inject::Action::kUpdated && r.stale)
    return "updated to " + sizing::format_quantity(r.size()) + " (was " + r.summary + ")";
  return r.summary;
}

std::string DocumentWorker::Place::operator()(int rel_line) const {
  return file + ":" + std::to_string(rel_line > 0 ? raw.first_line + rel_line - 1 : raw.first_line);
}

DocumentOutcome DocumentWorker::run(const std::string& file, int index, const RawDocument& raw) {
  DocumentOutcome out;
  const Place at{file, raw};
  if (auto parsed = parse_document(raw.text, ydoc_); !parsed) {
    out.status = Failure{at(parsed.line()) + ": " + parsed.error() + syntax_hint(raw.text, parsed.line())};
    return out;
  }
  const YamlNode* node = ydoc_.root;
  if (!node) {  // empty or comments only
    if (opts_.format == OutputFormat::kYaml) set_text(out, raw.text, &ydoc_);
    return out;
  }
  if (node->kind != YamlNode::Kind::kMap) {
    out.status = Failure{at(node->line) + ": document " + std::to_string(index) + " is " + type_name(*node) +
                                 ", expected a Kubernetes object (a mapping)"};
    return out;
  }
  if (!resolve(node, "/kind")) {  // kubectl and kubeconform refuse it the same way
    out.status = Failure{at(node->line) + ": document " + std::to_string(index) +
                                 " is not a Kubernetes object: missing 'kind' key (a Helm values file or other "
                                 "configuration? --exclude it, or check --skip-invalid)"};
    return out;
  }
  node_budget_ = node_budget(raw.text);
  if (ydoc_.has_aliases) {
    // Aliases may expand past the budget (an alias bomb): refused here, before any walk expands
    // them. Without aliases the tree converts within its budget, so there is nothing to check.
    if (auto doc = to_json(node, node_budget_); !doc) {
      out.status = Failure{at(doc.line()) + ": " + doc.error()};
      return out;
    }
  } else if (!may_hold_templates(node)) {
    out.status = write(at, out);  // nothing to size: not searched
    return out;
  }
  out.status = analyze(at, index, out);
  return out;
}

DocumentOutcome DocumentWorker::run_parsed(const std::string& file, int index, const RawDocument& raw,
                                           YamlDocument& tree) {
  DocumentOutcome out;
  std::swap(ydoc_, tree);  // the caller's tree is this turn's; the arena goes back after it
  node_budget_ = node_budget(raw.text);
  out.status = analyze(Place{file, raw}, index, out);
  std::swap(ydoc_, tree);
  return out;
}

// The templates' reports, and the document's text as it is to be written. Only the templates
// become JSON, for the engine: the rest of the document is searched as a tree.
Status DocumentWorker::analyze(const Place& at, int index, DocumentOutcome& out) {
  for (const YamlNode* rt : find_runtimes(ydoc_.root)) {
    auto obj = to_json(rt, node_budget_);
    if (!obj) return Failure{at(obj.line()) + ": " + obj.error()};
    std::string name = trainjob::runtime_name(*obj);
    out.runtimes.emplace_back(std::move(name), std::move(*obj));
  }
  for (const auto& ref : find_templates(ydoc_.root)) {
    auto tmpl = to_json(ref.node, node_budget_);
    if (!tmpl) return Failure{at(tmpl.line()) + ": " + tmpl.error()};  // the document converted within this budget
    out.reports.push_back(report_template(at, index, ref, *tmpl, out.runtimes));
  }
  return write(at, out);
}

// The document's text as it is to be written, after its templates' reports.
Status DocumentWorker::write(const Place& at, DocumentOutcome& out) {
  if (opts_.format == OutputFormat::kNone) return Ok{};
  // Written out, the document would pass on what kubectl refuses: mutate stops instead.
  for (const auto& rep : out.reports) {
    if (rep.rejected.empty()) continue;
    auto refused = Failure{rep.file + ":" + std::to_string(rep.rejected.front().line) + ": " +
                                   rep.rejected.front().text};
    out.reports.clear();  // the document is refused as a whole: no report for its templates
    return refused;
  }
  const bool changed =
      std::any_of(out.reports.begin(), out.reports.end(), [](const auto& r) { return r.written(); });
  return changed ? write_changed(at, out) : write_unchanged(at, out);
}

// Keys written twice within the template, each at its own line.
void DocumentWorker::note_repeats(const Place& at, const YamlNode* tnode, TemplateReport& rep) const {
  Repeats dups;
  if (ydoc_.has_aliases) {
    std::size_t budget = node_budget_;
    repeats_by_walk(tnode, at.raw.first_line, budget, dups);
  } else {
    // Without aliases the template's mappings are the ones inside its text.
    for (const auto& r : ydoc_.repeated_keys)
      if (r.map->start >= tnode->start && r.map->end <= tnode->end) note_repeat(r.key, r.first, at.raw.first_line, dups);
  }
  for (auto& [line, msg] : dups)  // the line is the repeat's own, not an annotation's
    rep.result.warnings.push_back({std::move(msg), "", at.raw.first_line + line - 1});
}

// The tree as one JSON object.
Status DocumentWorker::set_json(const Place& at, DocumentOutcome& out) {
  auto text = emit_json(ydoc_.root, node_budget_ * 2);
  if (!text) return Failure{at(text.line()) + ": " + text.error()};
  out.text = std::move(*text);
  return Ok{};
}

Status DocumentWorker::write_unchanged(const Place& at, DocumentOutcome& out) {
  if (opts_.format == OutputFormat::kJson) return set_json(at, out);
  set_text(out, at.raw.text, &ydoc_);
  return Ok{};
}

namespace {

// The changed templates' patches, in report order.
std::vector<TemplatePatch> template_patches(const std::vector<TemplateReport>& reports) {
  std::vector<TemplatePatch> patches;
  for (const auto& rep : reports)
    if (rep.written()) patches.push_back({rep.ref.pointer, &rep.result.patch});
  return patches;
}

}  // namespace

// The document's own text with the plan written into it, verified by reading it back as the
// original tree with the plan applied: from the inserted lines alone where read_back.h shows that
// suffices, else the whole text; a failure says why (with the anchor's line for an anchor
// conflict).
Result<std::string> DocumentWorker::surgical_edit(const RawDocument& raw, const std::vector<TemplateReport>& reports) {
  auto plan = plan_edits(ydoc_, template_patches(reports));
  if (!plan) return plan.failure_part();
  auto edit = edit_in_place(raw.text, ydoc_, *plan);
  if (!edit) return edit.failure_part();
  // The local read-back needs a final line break, so set_text never asks check_doc_ for its tree.
  if (reads_back_from_insertions(raw.text, ydoc_, *edit, check_doc_)) {
    // Debug and sanitizer builds read the whole text back as well: the local read-back never
    // accepts what the whole one refuses (every suite's edits cross-check it there).
    SHMGUARD_ASSERT(parse_document(edit->text, check_doc_).ok() &&
                    matches_plan(ydoc_.root, check_doc_.root, *plan, node_budget(edit->text)));
    return std::move(edit->text);
  }
  if (auto parsed = parse_document(edit->text, check_doc_); !parsed)
    return Failure{"the edited text does not parse: " + parsed.error()};
  if (!matches_plan(ydoc_.root, check_doc_.root, *plan, node_budget(edit->text))) {
    // With aliases, the likely cause: an edited template reaches an anchored node that a place
    // shmguard leaves alone (or edits differently) shares. Re-emitting would expand the anchor.
    for (const auto& e : plan->edits)
      if (e.anchor && e.anchor != ydoc_.root)
        return Failure{
            "an anchored node here is shared through an alias with a template shmguard does not change the same "
            "way (not a training pod, opted out, or another size): editing it would change that one too",
            e.anchor->line, static_cast<int>(EditFailure::kAnchorConflict)};
    return Failure{"the edited text does not read back as the patched object", 0,
                   static_cast<int>(EditFailure::kUnsupportedLayout)};
  }
  return std::move(edit->text);
}

// The re-emitter: the patched tree written out in full, leading comments and directives kept.
Status DocumentWorker::reemit(const Place& at, DocumentOutcome& out) {
  if (!ydoc_.unshare(node_budget_))
    return Failure{at(0) + ": document expands to too many nodes (alias expansion?)"};
  // Planned again on the unshared tree: every alias now has its own nodes to edit.
  auto plan = plan_edits(ydoc_, template_patches(out.reports));
  if (!plan) return Failure{at(0) + ": internal error applying the patches: " + plan.error()};
  apply_plan(ydoc_, *plan);
  if (opts_.format == OutputFormat::kJson) return set_json(at, out);
  auto text = emit_yaml(ydoc_.root, node_budget_ * 2);
  if (!text) return Failure{at(text.line()) + ": " + text.error()};
  bool had_sep = false;
  std::string head = leading_comments(at.raw.text, had_sep);
  std::string body = (had_sep ? std::string("---\n") : std::string()) + head + *text;
  if (at.raw.text.find("\r\n") != std::string::npos) {
    std::erase(body, '\r');
    body = to_crlf(body);
  }
  set_text(out, std::move(body), nullptr);
  return Ok{};
}

Status DocumentWorker::write_changed(const Place& at, DocumentOutcome& out) {
  SHMGUARD_ASSERT(opts_.format != OutputFormat::kNone);
  if (opts_.format == OutputFormat::kYaml) {
    auto edit = surgical_edit(at.raw, out.reports);
    if (edit) {
      set_text(out, std::move(*edit), &check_doc_);
      return Ok{};
    }
    // Re-emitting loses comments and layout: only when asked (docs/cli.md "mutate").
    const bool anchor = edit.kind<EditFailure>() == EditFailure::kAnchorConflict;
    if (!opts_.allow_reformat) {
      if (anchor)
        return Failure{at(edit.line()) + ": " + edit.error() +
                               "; nothing was written (--allow-reformat re-emits the document with the anchor expanded)"};
      const auto first = std::find_if(out.reports.begin(), out.reports.end(),
                                      [](const TemplateReport& r) { return r.written(); });
      const int line = first == out.reports.end() ? 0 : first->line - at.raw.first_line + 1;
      return Failure{at(line) + ": cannot edit the document in place (" + edit.error() +
                             "); nothing was written (--allow-reformat re-emits the document: comments and layout lost)"};
    }
    const std::string why = anchor ? edit.error() + " at " + at(edit.line()) : edit.error();
    for (auto& rep : out.reports)
      if (rep.written()) rep.reemitted_because = why;
  }
  return reemit(at, out);
}

}  // namespace shmguard::manifests
