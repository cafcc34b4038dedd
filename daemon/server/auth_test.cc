// Remote access: the pieces of daemon/rpc/auth.h, then a real daemon with a TCP listener (loopback
// without TLS, TLS, TLS with client certificates) driven by the real TraceService client, and the
// tracetorchd binary refusing unsafe configurations. Certificates are made at test time with the
// openssl CLI (the TLS tests skip when it is missing).
#include "daemon/rpc/auth.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/server/daemon.h"
#include "daemon/testing/test_util.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "service_client/service_client.h"
#include "service_client/watch_stream.h"
#include "trace/testing/unprivileged.h"

namespace tracetorch::daemon {
namespace {

using test_util::TempDir;

void WriteFile(const std::string& path, const std::string& data, mode_t mode = 0600) {
  {
    std::ofstream out(path, std::ios::trunc);
    out << data;
  }
  chmod(path.c_str(), mode);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

constexpr char kToken[] = "f3b1c0de5a1e7e57f3b1c0de5a1e7e57";

// ---- Pieces ------------------------------------------------------------------------------------

TEST(NormalizeTcpAddress, BarePortIsLoopbackOthersAreKept) {
  EXPECT_EQ(*NormalizeTcpAddress("7171"), "127.0.0.1:7171");
  EXPECT_EQ(*NormalizeTcpAddress(" 0 "), "127.0.0.1:0");
  EXPECT_EQ(*NormalizeTcpAddress("0.0.0.0:7171"), "0.0.0.0:7171");
  EXPECT_EQ(*NormalizeTcpAddress("[::1]:7171"), "[::1]:7171");
  EXPECT_EQ(*NormalizeTcpAddress("trace.example.com:443"), "trace.example.com:443");
  for (const char* bad : {"", ":7171", "host:", "host:99999", "host:7x", "::1:7171", "[::1]",
                          "[::1]7171", "abc", "123456"}) {
    EXPECT_EQ(NormalizeTcpAddress(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(IsLoopbackAddress, OnlyLoopbackHosts) {
  for (const char* yes : {"127.0.0.1:1", "127.1.2.3:1", "localhost:1", "LOCALHOST:1", "[::1]:1"}) {
    EXPECT_TRUE(IsLoopbackAddress(yes)) << yes;
  }
  for (const char* no : {"0.0.0.0:1", "[::]:1", "10.0.0.1:1", "128.0.0.1:1", "example.com:1",
                         "localhost.evil.com:1", "[::ffff:10.0.0.1]:1", "garbage"}) {
    EXPECT_FALSE(IsLoopbackAddress(no)) << no;
  }
}

TEST(ConstantTimeEquals, ComparesContentAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("secret", "secret"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secreT"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secret2"));
  EXPECT_FALSE(ConstantTimeEquals("secret", "secre"));
  EXPECT_FALSE(ConstantTimeEquals("secret", ""));
  EXPECT_FALSE(ConstantTimeEquals("", "x"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

TEST(ReadTokenFile, FirstLineTrimmedAndModeChecked) {
  TempDir dir{"ttauth"};
  const std::string path = dir.path() + "/token";
  WriteFile(path, "  tok-123  \nsecond line\n", 0600);
  absl::StatusOr<TokenFile> t = ReadTokenFile(path);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->token, "tok-123");
  EXPECT_FALSE(t->group_or_world_accessible);
  chmod(path.c_str(), 0644);
  EXPECT_TRUE(ReadTokenFile(path)->group_or_world_accessible);
  chmod(path.c_str(), 0620);
  EXPECT_TRUE(ReadTokenFile(path)->group_or_world_accessible);
}

TEST(ReadTokenFile, BadFilesNameTheFile) {
  TempDir dir{"ttauth"};
  const std::string missing = dir.path() + "/missing";
  absl::Status s = ReadTokenFile(missing).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), missing)) << s;

  const std::string empty = dir.path() + "/empty";
  WriteFile(empty, "  \n token-on-line-2\n");
  s = ReadTokenFile(empty).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), empty)) << s;

  EXPECT_EQ(ReadTokenFile(dir.path()).status().code(), absl::StatusCode::kInvalidArgument);
  const std::string control = dir.path() + "/control";
  WriteFile(control, "tok\x01en\n");
  EXPECT_EQ(ReadTokenFile(control).status().code(), absl::StatusCode::kInvalidArgument);
  const std::string huge = dir.path() + "/huge";
  WriteFile(huge, std::string(5000, 'a'));
  EXPECT_EQ(ReadTokenFile(huge).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ReadTokenFile, AFileItMayNotReadIsPermissionDenied) {
  TempDir dir{"ttauth"};
  ASSERT_EQ(chmod(dir.path().c_str(), 0755), 0);  // Others may look up the file, not read it.
  const std::string locked = dir.path() + "/locked";
  WriteFile(locked, "tok\n", 0000);
  // Root reads anything: the check runs unprivileged.
  tracetorch::testing::ExpectAsUnprivileged([&] {
    const absl::Status s = ReadTokenFile(locked).status();
    return s.code() == absl::StatusCode::kPermissionDenied &&
           absl::StrContains(s.message(), locked);
  });
}

TEST(ValidateTcpListenerOptions, RefusesUnsafeOrIncompleteSettings) {
  TcpListenerOptions o;
  o.address = "7171";
  o.token_file = "/t";
  EXPECT_TRUE(ValidateTcpListenerOptions(o).ok());

  TcpListenerOptions no_token = o;
  no_token.token_file.clear();
  absl::Status s = ValidateTcpListenerOptions(no_token);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "--token-file")) << s;

  TcpListenerOptions exposed = o;
  exposed.address = "0.0.0.0:7171";
  s = ValidateTcpListenerOptions(exposed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "without TLS")) << s;
  exposed.address = "trace.example.com:7171";
  EXPECT_EQ(ValidateTcpListenerOptions(exposed).code(), absl::StatusCode::kInvalidArgument);
  exposed.tls_cert_file = "/c";
  exposed.tls_key_file = "/k";
  EXPECT_TRUE(ValidateTcpListenerOptions(exposed).ok());

  TcpListenerOptions half = o;
  half.tls_cert_file = "/c";
  EXPECT_EQ(ValidateTcpListenerOptions(half).code(), absl::StatusCode::kInvalidArgument);

  TcpListenerOptions ca_only = o;
  ca_only.tls_client_ca_file = "/ca";
  EXPECT_EQ(ValidateTcpListenerOptions(ca_only).code(), absl::StatusCode::kInvalidArgument);

  TcpListenerOptions bad_address = o;
  bad_address.address = "host:";
  EXPECT_EQ(ValidateTcpListenerOptions(bad_address).code(), absl::StatusCode::kInvalidArgument);
}

TEST(BearerTokenProcessor, AcceptsOnlyTheTokenAndCountsRejections) {
  BearerTokenProcessor p(kToken);
  auto process = [&](const std::string& value, bool present) {
    grpc::AuthMetadataProcessor::InputMetadata in;
    const std::string key = "authorization";
    if (present) in.emplace(grpc::string_ref(key), grpc::string_ref(value));
    grpc::AuthMetadataProcessor::OutputMetadata consumed, response;
    grpc::Status s = p.Process(in, nullptr, &consumed, &response);
    if (s.ok()) {
      EXPECT_EQ(consumed.count("authorization"), 1u);
    }
    return s.error_code();
  };
  EXPECT_EQ(process(absl::StrCat("Bearer ", kToken), true), grpc::StatusCode::OK);
  EXPECT_EQ(process(absl::StrCat("bearer ", kToken), true), grpc::StatusCode::OK);
  EXPECT_EQ(p.rejected(), 0u);
  EXPECT_EQ(process("", false), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(process("Bearer wrong", true), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(process(kToken, true), grpc::StatusCode::UNAUTHENTICATED);  // No scheme.
  EXPECT_EQ(process(absl::StrCat("Basic ", kToken), true), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(process("Bearer ", true), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(process(absl::StrCat("Bearer ", kToken, "x"), true), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(p.rejected(), 6u);
}

TEST(MakeTcpListener, ReadsFilesAndWarnsAboutAReadableToken) {
  TempDir dir{"ttauth"};
  const std::string token = dir.path() + "/token";
  WriteFile(token, "short\n", 0644);
  TcpListenerOptions o;
  o.address = "7171";
  o.token_file = token;
  absl::StatusOr<TcpListener> l = MakeTcpListener(o);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->address, "127.0.0.1:7171");
  EXPECT_FALSE(l->tls);
  ASSERT_NE(l->processor, nullptr);
  ASSERT_NE(l->credentials, nullptr);
  ASSERT_EQ(l->warnings.size(), 2u);
  EXPECT_TRUE(absl::StrContains(l->warnings[0], "chmod 600")) << l->warnings[0];
  EXPECT_TRUE(absl::StrContains(l->warnings[1], "shorter than 16")) << l->warnings[1];

  o.tls_cert_file = dir.path() + "/cert.pem";
  o.tls_key_file = dir.path() + "/key.pem";
  absl::Status s = MakeTcpListener(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), "cert.pem")) << s;
  WriteFile(o.tls_cert_file, "not a certificate");
  WriteFile(o.tls_key_file, "-----BEGIN PRIVATE KEY-----\n");
  s = MakeTcpListener(o).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "not a PEM file")) << s;
}

// ---- A real daemon -----------------------------------------------------------------------------

// CA, server (SAN localhost, 127.0.0.1), client certificate, and a second, unrelated CA.
class Certificates {
 public:
  // Empty when openssl is missing or fails (the log says why).
  static std::unique_ptr<Certificates> Make(const std::string& dir, std::string* log) {
    if (std::system("openssl version >/dev/null 2>&1") != 0) {
      *log = "openssl CLI not found";
      return nullptr;
    }
    const std::string d = dir;
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    WriteFile(d + "/server.ext",
              "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
              "extendedKeyUsage=serverAuth\n");
    WriteFile(d + "/client.ext", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n");
    const std::string script = absl::StrCat(
        "set -e; cd '", d, "';",
        // Two CAs.
        "openssl req -x509 ", key, " -keyout ca.key -out ca.pem -days 2 -subj '/CN=tt test CA';",
        "openssl req -x509 ", key,
        " -keyout other-ca.key -out other-ca.pem -days 2 -subj '/CN=tt other CA';",
        // Server, signed by the first.
        "openssl req ", key, " -keyout server.key -out server.csr -subj '/CN=localhost';",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial ",
        "-out server.pem -days 2 -extfile server.ext;",
        // Client, signed by the first; and one signed by the other CA.
        "openssl req ", key, " -keyout client.key -out client.csr -subj '/CN=tt client';",
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial ",
        "-out client.pem -days 2 -extfile client.ext;",
        "openssl x509 -req -in client.csr -CA other-ca.pem -CAkey other-ca.key -CAcreateserial ",
        "-out client-other.pem -days 2 -extfile client.ext;");
    const std::string cmd = absl::StrCat("bash -c \"", script, "\" >'", d, "/openssl.log' 2>&1");
    if (std::system(cmd.c_str()) != 0) {
      *log = ReadAll(d + "/openssl.log");
      return nullptr;
    }
    auto c = std::make_unique<Certificates>();
    c->dir = d;
    return c;
  }
  std::string File(const std::string& name) const { return dir + "/" + name; }
  std::string dir;
};

class RemoteAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ = dir_.path() + "/token";
    WriteFile(token_file_, absl::StrCat(kToken, "\n"), 0600);
    config_.socket_path = dir_.path() + "/d.sock";
    config_.data_dir = "";
    config_.service_tcp_address = "127.0.0.1:0";
    config_.service_token_file = token_file_;
  }

  void Start() {
    auto d = Daemon::Start(config_);
    ASSERT_TRUE(d.ok()) << d.status();
    daemon_ = *std::move(d);
    ASSERT_GT(daemon_->tcp_port(), 0);
  }

  std::string TcpAddress() const { return absl::StrCat("127.0.0.1:", daemon_->tcp_port()); }

  // GetStats over TCP with these options; the status code.
  absl::StatusCode CallTcp(service_client::ServiceClientOptions options,
                           const std::string& address = "") {
    options.deadline = absl::Seconds(5);
    auto c = service_client::TraceServiceClient::Create(address.empty() ? TcpAddress() : address,
                                                        options);
    if (!c.ok()) return c.status().code();
    return (*c)->GetStats().status().code();
  }

  uint64_t UnauthenticatedCalls() {
    auto unix_client =
        service_client::TraceServiceClient::Create(daemon_->config().service_socket_path);
    EXPECT_TRUE(unix_client.ok());
    auto stats = (*unix_client)->GetStats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? stats->unauthenticated_calls() : ~0ull;
  }

  std::unique_ptr<Certificates> MakeCertificates() {
    std::string log;
    auto certs = Certificates::Make(dir_.path(), &log);
    if (certs == nullptr) ADD_FAILURE() << "cannot make certificates: " << log;
    return certs;
  }

  static bool HaveOpenssl() { return std::system("openssl version >/dev/null 2>&1") == 0; }

  TempDir dir_;
  std::string token_file_;
  DaemonConfig config_;
  std::unique_ptr<Daemon> daemon_;
};

TEST_F(RemoteAccessTest, LoopbackWithoutTlsNeedsTheToken) {
  Start();
  service_client::ServiceClientOptions right;
  right.token = kToken;
  EXPECT_EQ(CallTcp(right), absl::StatusCode::kOk);
  EXPECT_EQ(CallTcp(right, absl::StrCat("localhost:", daemon_->tcp_port())), absl::StatusCode::kOk);

  service_client::ServiceClientOptions wrong;
  wrong.token = "not-the-token";
  EXPECT_EQ(CallTcp(wrong), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(CallTcp(service_client::ServiceClientOptions()), absl::StatusCode::kUnauthenticated);
  service_client::ServiceClientOptions prefix;
  prefix.token = std::string(kToken).substr(0, 10);
  EXPECT_EQ(CallTcp(prefix), absl::StatusCode::kUnauthenticated);

  // Every method is guarded, streams included.
  auto c = service_client::TraceServiceClient::Create(TcpAddress(), wrong);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->ListSessions().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ((*c)->GetSnapshot("latest").status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ((*c)->ListBaselines().status().code(), absl::StatusCode::kUnauthenticated);
  v1::WatchRequest watch;
  watch.mutable_session()->set_session_id("latest");
  std::unique_ptr<service_client::WatchStream> stream = (*c)->Watch(watch);
  v1::WatchUpdate update;
  EXPECT_FALSE(stream->Read(&update));
  EXPECT_EQ(stream->Finish().code(), absl::StatusCode::kUnauthenticated);

  // The Unix socket needs no token; it reports the rejections.
  EXPECT_EQ(UnauthenticatedCalls(), 7u);
  auto right_client = service_client::TraceServiceClient::Create(TcpAddress(), right);
  ASSERT_TRUE(right_client.ok());
  auto stats = (*right_client)->GetStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->unauthenticated_calls(), 7u);
  EXPECT_EQ((*right_client)->GetSnapshot("latest").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RemoteAccessTest, TcpWithoutATokenIsRefused) {
  config_.service_token_file.clear();
  absl::Status s = Daemon::Start(config_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "token")) << s;

  config_.service_token_file = dir_.path() + "/no-such-token";
  s = Daemon::Start(config_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(s.message(), "no-such-token")) << s;
}

TEST_F(RemoteAccessTest, NonLoopbackWithoutTlsIsRefused) {
  config_.service_tcp_address = "0.0.0.0:0";
  absl::Status s = Daemon::Start(config_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "without TLS")) << s;
  EXPECT_FALSE(std::filesystem::exists(config_.socket_path));  // Refused before claiming anything.
}

TEST_F(RemoteAccessTest, NoTcpListenerUnlessConfigured) {
  config_.service_tcp_address.clear();
  config_.service_token_file.clear();
  auto d = Daemon::Start(config_);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ((*d)->tcp_port(), 0);
  EXPECT_EQ((*d)->Stats().unauthenticated_calls(), 0u);
  // TLS or token settings without a TCP listener are a mistake, not silently ignored.
  config_.tls_cert_file = "/c";
  EXPECT_EQ(ValidateRemoteAccess(config_).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RemoteAccessTest, TlsNeedsTheRightCaAndTheToken) {
  if (!HaveOpenssl()) GTEST_SKIP() << "openssl CLI not installed";
  auto certs = MakeCertificates();
  ASSERT_NE(certs, nullptr);
  // TLS allows a non-loopback listener.
  config_.service_tcp_address = "0.0.0.0:0";
  config_.tls_cert_file = certs->File("server.pem");
  config_.tls_key_file = certs->File("server.key");
  Start();

  service_client::ServiceClientOptions tls;
  tls.tls_ca_file = certs->File("ca.pem");
  tls.token = kToken;
  EXPECT_EQ(CallTcp(tls), absl::StatusCode::kOk);
  EXPECT_EQ(CallTcp(tls, absl::StrCat("localhost:", daemon_->tcp_port())), absl::StatusCode::kOk);
  service_client::ServiceClientOptions renamed = tls;
  renamed.tls_server_name = "localhost";
  EXPECT_EQ(CallTcp(renamed), absl::StatusCode::kOk);
  renamed.tls_server_name = "someone-else.example.com";  // Not in the certificate.
  EXPECT_EQ(CallTcp(renamed), absl::StatusCode::kUnavailable);

  service_client::ServiceClientOptions wrong = tls;
  wrong.token = "wrong";
  EXPECT_EQ(CallTcp(wrong), absl::StatusCode::kUnauthenticated);
  service_client::ServiceClientOptions missing = tls;
  missing.token.clear();
  EXPECT_EQ(CallTcp(missing), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(UnauthenticatedCalls(), 2u);

  // A plain-text client to the TLS port fails (no handshake), even with the right token.
  service_client::ServiceClientOptions plain;
  plain.token = kToken;
  EXPECT_EQ(CallTcp(plain), absl::StatusCode::kUnavailable);
  // A client trusting another CA refuses the server.
  service_client::ServiceClientOptions other_ca = tls;
  other_ca.tls_ca_file = certs->File("other-ca.pem");
  EXPECT_EQ(CallTcp(other_ca), absl::StatusCode::kUnavailable);
  EXPECT_EQ(UnauthenticatedCalls(), 2u);  // Failed handshakes never reach the token check.
}

TEST_F(RemoteAccessTest, ClientCertificateRequiredWithClientCa) {
  if (!HaveOpenssl()) GTEST_SKIP() << "openssl CLI not installed";
  auto certs = MakeCertificates();
  ASSERT_NE(certs, nullptr);
  config_.tls_cert_file = certs->File("server.pem");
  config_.tls_key_file = certs->File("server.key");
  config_.tls_client_ca_file = certs->File("ca.pem");
  Start();

  service_client::ServiceClientOptions no_cert;
  no_cert.tls_ca_file = certs->File("ca.pem");
  no_cert.token = kToken;
  EXPECT_EQ(CallTcp(no_cert), absl::StatusCode::kUnavailable);

  service_client::ServiceClientOptions with_cert = no_cert;
  with_cert.tls_cert_file = certs->File("client.pem");
  with_cert.tls_key_file = certs->File("client.key");
  EXPECT_EQ(CallTcp(with_cert), absl::StatusCode::kOk);

  service_client::ServiceClientOptions foreign_cert = with_cert;
  foreign_cert.tls_cert_file = certs->File("client-other.pem");
  EXPECT_EQ(CallTcp(foreign_cert), absl::StatusCode::kUnavailable);

  // A valid certificate does not replace the token.
  service_client::ServiceClientOptions cert_no_token = with_cert;
  cert_no_token.token.clear();
  EXPECT_EQ(CallTcp(cert_no_token), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(UnauthenticatedCalls(), 1u);
}

TEST_F(RemoteAccessTest, MismatchedCertificateAndKeyAreAnError) {
  if (!HaveOpenssl()) GTEST_SKIP() << "openssl CLI not installed";
  auto certs = MakeCertificates();
  ASSERT_NE(certs, nullptr);
  config_.tls_cert_file = certs->File("server.pem");
  config_.tls_key_file = certs->File("client.key");
  absl::Status s = Daemon::Start(config_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(s.message(), "certificate and key")) << s;
}

// ---- The binary --------------------------------------------------------------------------------

#ifdef TRACETORCHD_BINARY
// Runs tracetorchd with `args` (it must exit by itself); returns the exit code, stderr+stdout in
// `output`.
int RunDaemon(const std::string& dir, const std::string& args, std::string* output) {
  const std::string log = dir + "/run.log";
  const std::string cmd =
      absl::StrCat("timeout 20 '", TRACETORCHD_BINARY, "' --socket '", dir, "/b.sock' --data-dir '",
                   dir, "/data' ", args, " >'", log, "' 2>&1");
  const int status = std::system(cmd.c_str());
  *output = ReadAll(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(TracetorchdBinary, RefusesUnsafeTcpWithExitCode2) {
  TempDir dir{"ttauth"};
  const std::string token = dir.path() + "/token";
  WriteFile(token, absl::StrCat(kToken, "\n"));
  std::string out;
  EXPECT_EQ(
      RunDaemon(dir.path(), absl::StrCat("--service-tcp 0.0.0.0:0 --token-file ", token), &out), 2)
      << out;
  EXPECT_TRUE(absl::StrContains(out, "without TLS")) << out;
  EXPECT_EQ(RunDaemon(dir.path(), "--service-tcp 7171", &out), 2) << out;
  EXPECT_TRUE(absl::StrContains(out, "--token-file")) << out;
  EXPECT_EQ(
      RunDaemon(dir.path(),
                absl::StrCat("--service-tcp 7171 --token-file ", token, " --tls-client-ca ", token),
                &out),
      2)
      << out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/b.sock"));
}
#endif

}  // namespace
}  // namespace tracetorch::daemon
