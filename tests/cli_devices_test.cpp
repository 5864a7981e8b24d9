// ktune sweep --devices at the command line: each bad list gets one line naming the value and
// what is allowed, before anything is created; --device and --devices exclude each other.
#include "tests/cli_test.hpp"

namespace ktune {
namespace {

namespace fs = std::filesystem;
using test::Cli;
using test::CliRun;

TEST_F(Cli, BadDeviceListsAreRefusedWithOneLine) {
  const std::string plan = (dir.path() / "p.plan").string();
  std::ofstream(plan) << "add_rmsnorm bf16 m=16,n=4096\n";
  struct Case {
    std::string args;
    std::string message;
  };
  const Case cases[] = {
      {"sweep --devices ''", "--devices \"\" is not allowed: expected all, or GPU ordinals"},
      {"sweep --devices 0,1,0", "--devices \"0,1,0\": GPU 0 is listed twice"},
      {"sweep --devices 0,gpu1", "\"gpu1\" is not a GPU ordinal"},
      {"sweep --devices 0,,1", "an empty item between commas"},
      {"sweep --devices 5000", "\"5000\" is not a GPU ordinal"},
      {"sweep --device 1 --devices 0,1",
       "--device \"1\" and --devices \"0,1\" both choose GPUs: give --device N for one, or "
       "--devices all|LIST for several"},
      {"sweep --plan " + plan + " --dry-run --devices 1,1", "GPU 1 is listed twice"},
      {"sweep --from-misses nothing.log --devices x", "\"x\" is not a GPU ordinal"},
  };
  for (const Case& c : cases) {
    const CliRun r = ktune(c.args + " --db " + (dir.path() / "t.db").string());
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_TRUE(contains(r.err, c.message)) << c.args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1u) << c.args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << c.args << "\n" << r.out;
    EXPECT_FALSE(fs::exists(dir.path() / "t.db")) << c.args << ": nothing is created";
  }
}

TEST_F(Cli, DevicesThatAreNotThereAreNamed) {
  const std::string db = " --db " + (dir.path() / "t.db").string();
  if (!test::gpu_missing_reason().empty()) {
    // No GPU here: `all` and any ordinal say so, with why the driver found none.
    for (const std::string& list : {std::string("all"), std::string("0"), std::string("0,1")}) {
      const CliRun r = ktune("sweep --devices " + list + db);
      EXPECT_EQ(r.code, 3) << list << "\n" << r.err;
      EXPECT_TRUE(contains(r.err, "no CUDA device found: --devices " +
                                      (list == "all" ? list : "\"" + list + "\"") + ": "))
          << r.err;
      EXPECT_EQ(lines(r.err), 1u) << r.err;
    }
  }
  // An ordinal past the GPUs of this machine (none, or a few).
  const CliRun r = ktune("sweep --devices 0,1023" + db);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_TRUE(contains(r.err, "--devices \"0,1023\": ")) << r.err;
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_FALSE(fs::exists(dir.path() / "t.db"));
}

TEST_F(Cli, SweepHelpShowsDevices) {
  const CliRun r = ktune("sweep --help");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "--devices")) << r.out;
  EXPECT_TRUE(contains(r.out, "--device N | --devices all|LIST")) << r.out;
}

}  // namespace
}  // namespace ktune
