#include "service_client/credentials.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "service_client/service_client.h"
#include "trace/testing/unprivileged.h"

namespace tracetorch::service_client {
namespace {

constexpr char kPem[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = "/tmp/ttcred_XXXXXX";
    dir_ = mkdtemp(tmpl.data());
    for (const char* v : kVars) unsetenv(v);
  }
  void TearDown() override {
    for (const char* v : kVars) unsetenv(v);
    std::filesystem::remove_all(dir_);
  }
  std::string Write(const std::string& name, const std::string& data) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << data;
    return path;
  }

  static constexpr const char* kVars[] = {"TRACETORCH_TOKEN",   "TRACETORCH_TOKEN_FILE",
                                          "TRACETORCH_TLS_CA",  "TRACETORCH_TLS_CERT",
                                          "TRACETORCH_TLS_KEY", "TRACETORCH_TLS_SERVER_NAME"};
  std::string dir_;
};

TEST_F(CredentialsTest, EmptyEnvironmentMeansPlainWithoutToken) {
  absl::StatusOr<ServiceClientOptions> o = ServiceClientOptionsFromEnv();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->token.empty());
  EXPECT_TRUE(o->tls_ca_file.empty());
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> c = MakeChannelCredentials(*o);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(*c, nullptr);
}

TEST_F(CredentialsTest, TokenFromVariableWinsOverFile) {
  setenv("TRACETORCH_TOKEN_FILE", Write("token", "  from-file \nignored\n").c_str(), 1);
  absl::StatusOr<ServiceClientOptions> o = ServiceClientOptionsFromEnv();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->token, "from-file");
  setenv("TRACETORCH_TOKEN", "from-env", 1);
  EXPECT_EQ(ServiceClientOptionsFromEnv()->token, "from-env");
}

TEST_F(CredentialsTest, UnreadableTokenFileIsNamed) {
  const std::string missing = dir_ + "/nope";
  setenv("TRACETORCH_TOKEN_FILE", missing.c_str(), 1);
  absl::Status s = ServiceClientOptionsFromEnv().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), missing)) << s;
  setenv("TRACETORCH_TOKEN_FILE", Write("empty", "\n").c_str(), 1);
  EXPECT_EQ(ServiceClientOptionsFromEnv().status().code(), absl::StatusCode::kInvalidArgument);
}

// A file that exists but cannot be read is InvalidArgument, naming it (NotFound is for a missing
// one). Root reads any file, so the check runs as nobody (trace/testing/unprivileged.h).
TEST_F(CredentialsTest, FileWithoutReadPermissionIsInvalidArgument) {
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);  // mkdtemp made it private to its owner.
  const std::string ca = Write("ca.pem", kPem);
  ASSERT_EQ(chmod(ca.c_str(), 0), 0);
  setenv("TRACETORCH_TLS_CA", ca.c_str(), 1);
  testing::ExpectAsUnprivileged([&ca] {
    const absl::Status s = ServiceClientOptionsFromEnv().status();
    return s.code() == absl::StatusCode::kInvalidArgument && absl::StrContains(s.message(), ca);
  });
}

TEST_F(CredentialsTest, TlsFilesFromEnvironmentAreChecked) {
  setenv("TRACETORCH_TLS_CA", Write("ca.pem", kPem).c_str(), 1);
  setenv("TRACETORCH_TLS_SERVER_NAME", "daemon.internal", 1);
  absl::StatusOr<ServiceClientOptions> o = ServiceClientOptionsFromEnv();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->tls_ca_file, dir_ + "/ca.pem");
  EXPECT_EQ(o->tls_server_name, "daemon.internal");

  const std::string missing = dir_ + "/client.pem";
  setenv("TRACETORCH_TLS_CERT", missing.c_str(), 1);
  absl::Status s = ServiceClientOptionsFromEnv().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), missing)) << s;
  setenv("TRACETORCH_TLS_CERT", Write("junk.pem", "junk").c_str(), 1);
  s = ServiceClientOptionsFromEnv().status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "junk.pem")) << s;
}

TEST_F(CredentialsTest, MakeChannelCredentialsChecksFilesAndPairs) {
  ServiceClientOptions o;
  o.tls_ca_file = dir_ + "/missing-ca.pem";
  absl::Status s = MakeChannelCredentials(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), "missing-ca.pem")) << s;

  o.tls_ca_file = Write("ca.pem", kPem);
  EXPECT_TRUE(MakeChannelCredentials(o).ok());
  o.tls_cert_file = Write("cert.pem", kPem);
  s = MakeChannelCredentials(o).status();  // A certificate without its key.
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  o.tls_key_file = Write("key.pem", "-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n");
  EXPECT_TRUE(MakeChannelCredentials(o).ok());

  ServiceClientOptions no_ca;
  no_ca.tls_cert_file = o.tls_cert_file;
  no_ca.tls_key_file = o.tls_key_file;
  EXPECT_EQ(MakeChannelCredentials(no_ca).status().code(), absl::StatusCode::kInvalidArgument);
  ServiceClientOptions name_only;
  name_only.tls_server_name = "x";
  EXPECT_EQ(MakeChannelCredentials(name_only).status().code(), absl::StatusCode::kInvalidArgument);
}

// The value of channel argument `key`, or "" when absent.
std::string ArgValue(const grpc::ChannelArguments& args, const std::string& key) {
  const grpc_channel_args c = args.c_channel_args();
  for (size_t i = 0; i < c.num_args; ++i) {
    if (key == c.args[i].key && c.args[i].type == GRPC_ARG_STRING) return c.args[i].value.string;
  }
  return "";
}

TEST_F(CredentialsTest, ServerNameOverrideOnlyWithTls) {
  ServiceClientOptions o;
  o.tls_server_name = "daemon.internal";
  const grpc::ChannelArguments plain = MakeChannelArguments(o);
  EXPECT_EQ(ArgValue(plain, GRPC_SSL_TARGET_NAME_OVERRIDE_ARG), "");
  o.tls_ca_file = "/ca.pem";
  const grpc::ChannelArguments tls = MakeChannelArguments(o);
  EXPECT_EQ(ArgValue(tls, GRPC_SSL_TARGET_NAME_OVERRIDE_ARG), "daemon.internal");
}

TEST_F(CredentialsTest, UnixSocketIgnoresTlsSettings) {
  ServiceClientOptions o;
  o.tls_ca_file = dir_ + "/missing-ca.pem";  // Would be NotFound for TCP.
  EXPECT_TRUE(TraceServiceClient::Create(dir_ + "/d.sock", o).ok());
  EXPECT_EQ(TraceServiceClient::Create("127.0.0.1:1", o).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tracetorch::service_client
