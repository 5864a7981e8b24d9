// Tests of the JSON and CSV exports (db/export.cpp).
#include "db/store.hpp"

#include <algorithm>

#include "db_test_support.hpp"

namespace ktune::test {
namespace {

TEST(DbExport, JsonEscapesEverything) {
  TrialRecord t = make_trial("n=1", "vec=8", 1.5);
  t.id = 7;
  t.detail = std::string("say \"hi\" \\ back\nline\ttab\x01 ctrl \xff bad \xc3\xa9 ok");
  t.created_at = "2026-01-02T03:04:05Z";
  const std::string json = export_json({t});
  EXPECT_EQ(json.substr(0, 2), "[\n");
  EXPECT_EQ(json.substr(json.size() - 2), "]\n");
  EXPECT_CONTAINS(
      json,
      "\"detail\": \"say \\\"hi\\\" \\\\ back\\nline\\ttab\\u0001 ctrl \xef\xbf\xbd bad "
      "\xc3\xa9 ok\"");
  EXPECT_CONTAINS(json, "\"id\": 7, \"sweep_id\": 0, ");
  EXPECT_CONTAINS(json, "\"dtype\": \"bf16\"");
  EXPECT_CONTAINS(json, "\"status\": \"ok\"");
  EXPECT_CONTAINS(json, "\"median_us\": 1.5, ");
  EXPECT_CONTAINS(json, "\"created_at\": \"2026-01-02T03:04:05Z\", ");
  // The GPU the trial ran on: null and empty when not recorded (older databases).
  EXPECT_CONTAINS(json, "\"device_ordinal\": null, \"pci_bus_id\": \"\"}");
  t.device_ordinal = 1;
  t.pci_bus_id = "0000:1b:00.0";
  EXPECT_CONTAINS(export_json({t}), "\"device_ordinal\": 1, \"pci_bus_id\": \"0000:1b:00.0\"}");
  EXPECT_EQ(export_json({}), "[]\n");
  EXPECT_EQ(std::count(json.begin(), json.end(), '\n'), 3);  // "[", one object, "]"

  BestRecord b;
  b.device_key = "dev";
  b.arch = "sm_90a";
  b.median_us = 2.25;
  b.trial_id = 3;
  const std::string bj = best_to_json(b);
  EXPECT_EQ(bj.front(), '{');
  EXPECT_EQ(bj.back(), '}');
  EXPECT_CONTAINS(bj, "\"arch\": \"sm_90a\"");
  EXPECT_CONTAINS(bj, "\"median_us\": 2.25");
  EXPECT_CONTAINS(bj, "\"trial_id\": 3");
}

TEST(DbExport, CsvQuotesWhatNeedsIt) {
  TrialRecord t = make_trial("rows=4,cols=8", "plain", 2.5, TrialStatus::compile_error);
  t.detail = "error: \"x\" undeclared\nline 2";
  const std::string csv = export_csv({t, make_trial("n=1", "p", 1.0)});
  const std::string header =
      "id,sweep_id,device_key,op,dtype,problem_key,params_key,template_hash,nvrtc_version,status,"
      "detail,median_us,min_us,max_us,spread_pct,repetitions,registers,shared_bytes,local_bytes,"
      "spill_bytes,compile_seconds,created_at,device_ordinal,pci_bus_id\n";
  EXPECT_EQ(csv.substr(0, header.size()), header);
  EXPECT_CONTAINS(csv, ",\"rows=4,cols=8\",plain,h1,12090,compile_error,");
  EXPECT_CONTAINS(csv, ",\"error: \"\"x\"\" undeclared\nline 2\",2.5,0,0,0,0,");
  EXPECT_EQ(export_csv({}), header);
  TrialRecord on_gpu = make_trial("n=1", "p", 1.0);
  on_gpu.created_at = "2026-01-02T03:04:05Z";
  EXPECT_CONTAINS(export_csv({on_gpu}), ",2026-01-02T03:04:05Z,,\n");  // not recorded: empty
  on_gpu.device_ordinal = 3;
  on_gpu.pci_bus_id = "0000:c1:00.0";
  EXPECT_CONTAINS(export_csv({on_gpu}), ",2026-01-02T03:04:05Z,3,0000:c1:00.0\n");
}

TEST(DbExport, CsvNeutralisesSpreadsheetFormulas) {
  TrialRecord t = make_trial("n=1", "=HYPERLINK(\"http://x\",\"y\")", 2.5);
  t.op = "+cmd";
  t.device_key = "-2+3";
  t.template_hash = "@SUM(A1)";
  t.detail = "\t=1+1";
  t.created_at = "\r=2";
  t.nvrtc_version = -5;  // a number, not text: stays as it is
  const std::string csv = export_csv({t});
  const std::string row = csv.substr(csv.find('\n') + 1);
  // Each field is text to a spreadsheet (a leading '), quoted where RFC 4180 needs it.
  EXPECT_CONTAINS(row,
                  ",'-2+3,'+cmd,bf16,n=1,"
                  "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",'@SUM(A1),-5,ok,");
  EXPECT_CONTAINS(row, ",'\t=1+1,2.5,0,0,0,0,");
  EXPECT_CONTAINS(row, ",\"'\r=2\",,\n");
  EXPECT_EQ(row.find(",=HYPERLINK"), std::string::npos);
  EXPECT_EQ(row.find(",+cmd"), std::string::npos);
  // Plain values are untouched.
  EXPECT_EQ(export_csv({make_trial("n=1", "vec=8", 1.0)}).find('\''), std::string::npos);
}

}  // namespace
}  // namespace ktune::test
