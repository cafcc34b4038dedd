// Messages the daemon's tests feed sessions and compare (not part of tracetorchd): the builders of
// agent_messages.h (an agent's Hello, a layer table, a batch of events), proto equality that
// treats NaN as equal (a history's "no value"), and a snapshot in the form viewers are sent.
#ifndef TRACETORCH_DAEMON_TESTING_MESSAGES_H_
#define TRACETORCH_DAEMON_TESTING_MESSAGES_H_

#include <string>

#include "daemon/testing/agent_messages.h"  // IWYU pragma: export
#include "google/protobuf/util/field_comparator.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "protocol/session_info_proto.h"

namespace tracetorch::daemon::test_util {

// Equal protos (NaN equal to NaN), or the differences (at most 4000 characters of them).
inline ::testing::AssertionResult SameProto(const google::protobuf::Message& a,
                                            const google::protobuf::Message& b) {
  google::protobuf::util::DefaultFieldComparator nan_equal;
  nan_equal.set_treat_nan_as_equal(true);
  google::protobuf::util::MessageDifferencer d;
  d.set_field_comparator(&nan_equal);
  std::string report;
  d.ReportDifferencesToString(&report);
  if (d.Compare(a, b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << report.substr(0, 4000);
}

// `snapshot` (Session::ToSnapshot, SessionManager::GetSnapshot) as the service sends it.
inline v1::Snapshot Wire(const protocol::Snapshot& snapshot) {
  v1::Snapshot out;
  protocol::ToProto(snapshot, &out);
  return out;
}

}  // namespace tracetorch::daemon::test_util

#endif  // TRACETORCH_DAEMON_TESTING_MESSAGES_H_
