// The read-back from inserted lines: it accepts plain appends after block collections (and then the
// whole-document read-back agrees), and declines every shape its argument does not cover.
#include "manifests/read_back.h"

#include <gtest/gtest.h>

#include "manifests/edit_plan.h"

using namespace shmguard::manifests;
using nlohmann::json;

namespace {

const json kMount = {{"name", "shmguard-dshm"}, {"mountPath", "/dev/shm"}};
const json kVolume = {{"name", "shmguard-dshm"}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", "1Gi"}}}};

// What inject_pod asks of a pod without volumes or annotations.
json pod_ops(bool volumes_exist = false) {
  return json::array({
      {{"op", "add"}, {"path", "/metadata/annotations"}, {"value", {{"shmguard.io/injected-size", "1Gi"}}}},
      volumes_exist ? json{{"op", "add"}, {"path", "/spec/volumes/-"}, {"value", kVolume}}
                    : json{{"op", "add"}, {"path", "/spec/volumes"}, {"value", json::array({kVolume})}},
      {{"op", "add"}, {"path", "/spec/containers/0/volumeMounts"}, {"value", json::array({kMount})}},
  });
}

struct Checked {
  bool local = false;  // reads_back_from_insertions
  bool whole = false;  // parse_document + matches_plan, the reference
  std::string text;
};

// Edits `text` with `ops`, then `tamper` may change the edited text before both read-backs run.
Checked check(const std::string& text, const json& ops, void (*tamper)(EditedText&) = nullptr) {
  Checked c;
  YamlDocument doc, scratch, whole;
  EXPECT_TRUE(parse_document(text, doc).ok());
  auto plan = plan_edits(doc, {{"", &ops}});
  EXPECT_TRUE(plan.ok()) << plan.error();
  if (!plan) return c;
  auto edited = edit_in_place(text, doc, *plan);
  EXPECT_TRUE(edited.ok()) << edited.error();
  if (!edited) return c;
  if (tamper) tamper(*edited);
  c.text = edited->text;
  c.local = reads_back_from_insertions(text, doc, *edited, scratch);
  c.whole = parse_document(edited->text, whole).ok() && matches_plan(doc.root, whole.root, *plan, 100000);
  return c;
}

const char* kPod =
    "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p  # the pod\nspec:\n  containers:\n  - name: a\n    image: x\n"
    "    args:\n    - --lr\n    - '0.1'\n\n  # after the containers\n  restartPolicy: Never\n";

}  // namespace

TEST(ReadBack, AppendsAfterBlockCollectionsReadBackFromTheirLines) {
  auto c = check(kPod, pod_ops());
  EXPECT_TRUE(c.local) << c.text;
  EXPECT_TRUE(c.whole) << c.text;
  // Innermost first at one place: the container's mounts, then the pod's volumes, both at the end.
  const char* tail = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  restartPolicy: Never\n  containers:\n"
                     "  - name: a\n    image: x\n    args:\n    - run\n      twice\n";
  c = check(tail, pod_ops());
  EXPECT_TRUE(c.local) << c.text;
  EXPECT_TRUE(c.whole) << c.text;
  EXPECT_NE(c.text.find("      twice\n    volumeMounts:\n    - name: shmguard-dshm\n      mountPath: /dev/shm\n  volumes:\n"),
            std::string::npos)
      << c.text;
  // An existing list whose "-" sit at its key's column, followed by a key at that column; CRLF.
  std::string crlf = "apiVersion: v1\r\nkind: Pod\r\nmetadata:\r\n  name: p\r\nspec:\r\n  volumes:\r\n  - name: data\r\n"
                     "    emptyDir: {}\r\n  containers:\r\n  - name: a\r\n    image: x\r\n";
  c = check(crlf, pod_ops(true));
  EXPECT_TRUE(c.local) << c.text;
  EXPECT_TRUE(c.whole) << c.text;
}

TEST(ReadBack, DeclinesWhatItsArgumentDoesNotCover) {
  // The container ends in a block scalar that keeps its trailing blank lines. libyaml's mark ends
  // it after them, so the new lines follow them and the whole read-back agrees; but the argument
  // does not cover block scalars (a mark before them would move them behind the new lines), so
  // the local read-back leaves it to the whole one.
  const char* keep = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    args:\n"
                     "    - |+\n      echo hi\n\n  restartPolicy: Never\n";
  auto c = check(keep, pod_ops());
  EXPECT_FALSE(c.local) << c.text;
  EXPECT_TRUE(c.whole) << c.text;
  // No final line break; a directive; an alias; a flow collection edited; a replaced value.
  std::string pod(kPod);
  EXPECT_FALSE(check(pod.substr(0, pod.size() - 1), pod_ops()).local);
  EXPECT_FALSE(check("%YAML 1.1\n---\n" + pod, pod_ops()).local);
  EXPECT_FALSE(check(pod + "  hostname: &h a\n  subdomain: *h\n", pod_ops()).local);
  const char* flow = "metadata: {name: p}\nspec:\n  containers:\n  - {name: a, image: x}\n";
  c = check(flow, pod_ops());
  EXPECT_FALSE(c.local) << c.text;
  EXPECT_TRUE(c.whole) << c.text;
  const char* other = "metadata:\n  name: p\nspec:\n  volumes:\n  - name: shmguard-dshm\n    hostPath: {path: /x}\n"
                      "  containers:\n  - name: a\n";
  json replace = json::array({{{"op", "replace"}, {"path", "/spec/volumes/0"}, {"value", kVolume}}});
  c = check(other, replace);
  EXPECT_FALSE(c.local) << c.text;
  EXPECT_TRUE(c.whole) << c.text;
}

TEST(ReadBack, CatchesWhatTheInsertedLinesSayWrongly) {
  // A wrong value inside the inserted lines.
  auto c = check(kPod, pod_ops(), [](EditedText& e) {
    auto at = e.text.find("sizeLimit: 1Gi");
    e.text.replace(at, 14, "sizeLimit: 2Gi");
  });
  EXPECT_FALSE(c.local);
  EXPECT_FALSE(c.whole);
  // An inserted line one column too far left: the mount becomes a key of the pod's spec.
  c = check(kPod, pod_ops(), [](EditedText& e) {
    // insertions[0] holds the annotations, [1] the mounts.
    const auto at = e.text.find("    volumeMounts:", e.insertions[1].out_at);
    ASSERT_NE(at, std::string::npos);
    e.text.erase(at, 1);
    for (auto& i : e.insertions)
      if (i.out_at > at) --i.out_at;
      else if (at < i.out_at + i.size) --i.size;
  });
  EXPECT_FALSE(c.local) << c.text;
  // A byte outside the inserted lines changed.
  c = check(kPod, pod_ops(), [](EditedText& e) { e.text[e.text.find("image: x") + 7] = 'y'; });
  EXPECT_FALSE(c.local);
  EXPECT_FALSE(c.whole);
  // Text added after the last run.
  const char* joins = "metadata:\n  name: p\nspec:\n  containers:\n  - name: a\n    image: x\n";
  c = check(joins, pod_ops(), [](EditedText& e) {
    e.text += "    command: [sh]\n";  // not an insertion: the text after the last run changed
  });
  EXPECT_FALSE(c.local);
}
