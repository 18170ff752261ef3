// A test fixture around one real `gpupool server` started on a
// configuration text (written to ROOT/config.yaml, data in ROOT/data, ROOT
// a fresh temporary folder removed afterwards).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "tests/run_binary.h"
#include "tests/server_process.h"

namespace gpupool::testing {

class ConfiguredServerTest : public ::testing::Test {
 protected:
  // Starts the server; a test's SetUp calls it (ASSERT_NO_FATAL_FAILURE).
  void StartServer(const std::string& config) {
    root_ = MakeTempDir();
    std::ofstream(root_ + "/config.yaml") << config;
    server_ = std::make_unique<ServerProcess>(root_ + "/data", std::vector<std::string>{"--config", root_ + "/config.yaml"});
    ASSERT_TRUE(server_->Start()) << server_->log();
    admin_ = server_->admin_token();
  }
  void TearDown() override {
    server_.reset();
    if (!root_.empty()) std::filesystem::remove_all(root_);
  }

  std::string root_, admin_;
  std::unique_ptr<ServerProcess> server_;
};

}  // namespace gpupool::testing
