// `--observed` for check and mutate (see observed_flag.h).
#include "cli/observed_flag.h"

#include "base/text.h"
#include "sizing/quantity.h"

namespace shmguard::cli {

using manifests::Fit;
using nlohmann::json;

Result<manifests::Observed> load_observed(const std::vector<std::string>& files) {
  manifests::Observed seen;
  for (const auto& f : files) {
    auto text = read_file(f);
    if (!text) return Failure{"--observed: " + text.error()};
    if (auto s = manifests::read_observed(f, *text, seen); !s) return Failure{"--observed: " + s.error()};
  }
  return seen;
}

std::optional<manifests::OwnerSeen> apply_observed(const manifests::Observed& seen, const manifests::TemplateReport& rep,
                                                   const sizing::Params& params, Record& rec) {
  const auto size = manifests::template_size(rep.result);
  if (!size) return std::nullopt;
  auto fit = manifests::judge_observed(seen, rep.ref, *size, params);
  if (!fit) return std::nullopt;
  rec.observed = {{"peakBytes", fit->peak},          {"peak", sizing::format_human(fit->peak)},
                  {"pods", fit->pods},               {"sizeBytes", fit->size},
                  {"suggested", sizing::format_quantity(fit->suggested)},
                  {"fit", fit->fit == Fit::kOutgrown ? "outgrown" : fit->fit == Fit::kWasteful ? "wasteful" : "fits"},
                  {"message", fit->message}};
  if (fit->fit != Fit::kFits)
    rec.findings.push_back({fit->fit == Fit::kOutgrown ? Rule::kOutgrown : Rule::kWasteful, rec.line, fit->message});
  return fit;
}

void retouch_observed(const manifests::Observed& seen, const config::Config& cfg, manifests::TemplateReport& rep,
                      const json& tmpl) {
  auto& res = rep.result;
  Record unused;
  const auto fit = apply_observed(seen, rep, cfg.sizing, unused);
  if (!fit || fit->fit == Fit::kFits) {  // left as it is, whatever the engine would change
    const std::string engine = rep.summary_planned();
    res.summary = fit ? fit->message : "unchanged: no observed figures (" + engine + ")";
    if (res.mutated()) res.action = inject::Action::kSkipped, res.stale = false, res.patch = json::array();
    return;
  }
  auto edit = manifests::size_edit(res, rep.ref, tmpl, fit->suggested, cfg);
  res.action = inject::Action::kUpdated;
  res.stale = false;
  res.summary = "size " + sizing::format_quantity(fit->suggested) + " from the observed peak (" + fit->message.substr(0, fit->message.find(';')) + ")";
  res.patch = edit ? std::move(*edit) : json::array();
  rep.not_written = edit ? "" : edit.error();
}

}  // namespace shmguard::cli
