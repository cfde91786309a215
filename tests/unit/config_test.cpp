// Config loading: defaults, every key, and clear errors for bad input.
#include "config/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>

using namespace shmguard;
using namespace shmguard::config;

TEST(Config, EmptyGivesDefaults) {
  auto r = parse_config("");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_EQ((*r).sizing.prefetch_factor, 2u);
  EXPECT_EQ((*r).sizing.headroom_milli, 1500u);
  EXPECT_EQ((*r).sizing.base, 256 * sizing::kMi);
  EXPECT_EQ((*r).sizing.nccl_per_process, 64 * sizing::kMi);
  EXPECT_EQ((*r).sizing.min, sizing::kGi);
  EXPECT_EQ((*r).sizing.max, 64 * sizing::kGi);
  EXPECT_EQ((*r).sizing.default_size, 8 * sizing::kGi);
  EXPECT_EQ((*r).selection.label_keys.size(), 3u);
  EXPECT_EQ((*r).selection.image_globs, std::vector<std::string>{"*pytorch*"});
  EXPECT_FALSE((*r).selection.inject_init_containers);
}

TEST(Config, EveryKey) {
  auto r = parse_config(R"(
sizing:
  prefetchFactor: 3
  headroom: 1.25
  base: 128Mi
  ncclPerProcess: 32Mi
  min: 512Mi
  max: 32Gi
  default: 4Gi
selection:
  labelKeys: [team/training]
  imageGlobs: ["*torch*", "ghcr.io/acme/*"]
  injectInitContainers: true
  injectEphemeralContainers: true
)");
  ASSERT_TRUE(r.ok()) << r.error();
  const auto& c = (*r);
  EXPECT_EQ(c.sizing.prefetch_factor, 3u);
  EXPECT_EQ(c.sizing.headroom_milli, 1250u);
  EXPECT_EQ(c.sizing.base, 128 * sizing::kMi);
  EXPECT_EQ(c.sizing.nccl_per_process, 32 * sizing::kMi);
  EXPECT_EQ(c.sizing.min, 512 * sizing::kMi);
  EXPECT_EQ(c.sizing.max, 32 * sizing::kGi);
  EXPECT_EQ(c.sizing.default_size, 4 * sizing::kGi);
  EXPECT_EQ(c.selection.label_keys, std::vector<std::string>{"team/training"});
  EXPECT_EQ(c.selection.image_globs.size(), 2u);
  EXPECT_TRUE(c.selection.inject_init_containers);
  EXPECT_TRUE(c.selection.inject_ephemeral_containers);
}

TEST(Config, ErrorsNameTheKey) {
  struct Case {
    const char* yaml;
    int line;  // in the Failure's field, not in the message (0: none, a check across keys)
    const char* message;
  } cases[] = {
      {"sizing:\n  maxx: 1Gi\n", 2, "unknown key \"sizing.maxx\"; known keys: base, default, headroom, max, min, ncclPerProcess, prefetchFactor"},
      {"bogus: 1\n", 1, "unknown key \"bogus\"; known keys: inference, mode, ownerLookup, selection, sizing"},
      {"sizing:\n  max: lots\n", 2, "sizing.max: \"lots\" is not a quantity (no digits)"},
      {"sizing:\n  min: 2Gi\n  max: 1Gi\n", 0, "sizing.min (2Gi) is above sizing.max (1Gi)"},
      {"sizing:\n  default: 128Gi\n", 0, "sizing.default (128Gi) must lie between sizing.min and sizing.max"},
      {"sizing:\n  headroom: 0.5\n", 2, "sizing.headroom: must be between 1 and 100"},
      {"sizing:\n  headroom: x\n", 2, "sizing.headroom: expected a decimal like 1.5, got \"x\""},
      {"sizing:\n  prefetchFactor: 0\n", 2, "sizing.prefetchFactor: must be at least 1"},
      {"sizing:\n  base: -1Mi\n", 2, "sizing.base: \"-1Mi\" must not be negative"},
      {"selection:\n  labelKeys: team\n", 2, "selection.labelKeys: expected a list of strings"},
      {"selection:\n  labelKeys: [\"=trainer\"]\n", 0, "selection.labelKeys: \"=trainer\" has no label key (expected key or key=value)"},
      {"selection:\n  accelerators: [gpu]\n", 0, "selection.accelerators: \"gpu\" is not an extended resource name (expected domain/name, e.g. nvidia.com/gpu or nvidia.com/*)"},
      {"selection:\n  injectInitContainers: maybe\n", 2, "selection.injectInitContainers: expected true or false, got \"maybe\""},
      {"ownerLookup:\n  timeoutMs: 0\n", 2, "ownerLookup.timeoutMs: must be at least 1"},
      {"ownerLookup:\n  timeoutMs: 5000\n", 0, "ownerLookup.timeoutMs: 5000 is above 3000 (the lookup must finish well inside the webhook's own timeout)"},
      {"ownerLookup:\n  enabled: yes\n", 2, "ownerLookup.enabled: expected true or false, got \"yes\""},
      {"sizing: [1, 2]\n", 1, "sizing: expected a mapping"},
      {"- a\n- b\n", 1, "config: expected a mapping"},
      {"sizing: {max: 1Gi\n", 2, "invalid YAML: end of map flow not found"},
  };
  for (const auto& c : cases) {
    auto r = parse_config(c.yaml);
    ASSERT_FALSE(r.ok()) << c.yaml;
    EXPECT_EQ(r.error(), c.message) << c.yaml;
    EXPECT_EQ(r.line(), c.line) << c.yaml;
  }
}

TEST(Config, OwnerLookup) {
  const Config d;
  EXPECT_TRUE(d.owner_lookup.enabled);
  EXPECT_EQ(d.owner_lookup.timeout_ms, 500u);
  EXPECT_EQ(d.owner_lookup.cache_seconds, 30u);
  auto r = parse_config("ownerLookup:\n  enabled: false\n  timeoutMs: 250\n  cacheSeconds: 5\n");
  ASSERT_TRUE(r.ok()) << r.error();
  EXPECT_FALSE(r->owner_lookup.enabled);
  EXPECT_EQ(r->owner_lookup.timeout_ms, 250u);
  EXPECT_EQ(r->owner_lookup.cache_seconds, 5u);
}

TEST(Config, LoadFileNamesTheFile) {
  auto r = load_config_file("/nonexistent/shmguard.yaml");
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.error().find("/nonexistent/shmguard.yaml"), std::string::npos);
  char path[] = "/tmp/shmguard-config-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "sizing:\n  max: lots\n";
  auto bad = load_config_file(path);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error(), std::string(path) + ":2: sizing.max: \"lots\" is not a quantity (no digits)");
  std::ofstream(path) << "sizing:\n  max: 16Gi\n";
  auto ok = load_config_file(path);
  std::remove(path);
  ASSERT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ((*ok).sizing.max, 16 * sizing::kGi);
}

TEST(Config, HeadroomText) {
  EXPECT_EQ(sizing::headroom_text(1500), "1.5");
  EXPECT_EQ(sizing::headroom_text(2000), "2");
  EXPECT_EQ(sizing::headroom_text(1025), "1.025");
}
