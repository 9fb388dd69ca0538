// A rank that dies or hangs mid-step: the others end with a clear error in bounded time.
//
// The scenario runs in a child job (this binary again, under its own `mpirun -np 2`, started by
// the test with std::system and a hard timeout) so the test itself survives it. In the child,
// rank 1 trains a step, then at step 1, between forward and backward, either exits (_exit(17))
// or hangs (sleeps). Rank 0 goes on into backward, where its next collective cannot complete:
// the watchdog (AMOR_COMM_TIMEOUT_S=2) throws, rank 0 prints the error and calls MPI_Abort, as a
// runner would, which ends the job, the hung rank included. For the exit, the child mpirun is
// told not to end the job itself when a rank exits non-zero (OMPI_MCA_orte_abort_on_non_zero_status
// = 0), so what ends it is the survivors' own detection; under default settings Open MPI's mpirun
// would also end the job when it sees the exit.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdio>
#include <fstream>
#include <thread>

#include "runner/dist/dist_test_support.h"

namespace amor::dist {
namespace {

using namespace testing;

// The child job's body; never returns normally on rank 0 (MPI_Abort) when the scenario works.
int run_scenario(int argc, char** argv, const std::string& scenario) {
  MPI_Init(&argc, &argv);
  const int r = world_rank();
  try {
    MpiCommunicator comm(MPI_COMM_WORLD);
    model::ModelConfig cfg = tiny("transformer");
    auto m = build(cfg, DType::F64, 1);
    Fsdp f(*m, comm);
    for (int step = 0; step < 3; ++step) {
      model::Batch global = global_batch(cfg, 2, 5, 1, step);
      model::Batch local = rank_slice(global, r, comm.size());
      f.zero_grad();
      f.forward(local, true);
      if (step == 1 && r == 1) {
        std::fprintf(stderr, "[rank 1] %s mid-step\n", scenario == "die" ? "exiting" : "hanging");
        std::fflush(stderr);
        if (scenario == "die") _exit(17);
        std::this_thread::sleep_for(std::chrono::seconds(600));
      }
      f.backward(loss_weights(local, valid_count(global), DType::F64));
      f.step(0.02);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "[rank %d] run failed: %s\n", r, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  std::fprintf(stderr, "[rank %d] finished all steps\n", r);
  MPI_Finalize();
  return 0;
}

std::string self_exe() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

TEST(RankFailure, TheOthersEndWithAClearErrorInBoundedTime) {
  if (world_size() != 1) GTEST_SKIP() << "the 1-rank instance runs the 2-rank child jobs";
  const std::string exe = self_exe();
  ASSERT_FALSE(exe.empty());
  const char* path = std::getenv("PATH");
  const char* ld = std::getenv("LD_LIBRARY_PATH");
  for (const char* scenario : {"die", "hang"}) {
    SCOPED_TRACE(scenario);
    const std::string log = fmt::format("/tmp/amor_rank_failure_{}_{}.log", getpid(), scenario);
    // A clean environment: the child mpirun must not take this process's MPI variables as its own.
    const std::string cmd = fmt::format(
        "env -i PATH='{}' LD_LIBRARY_PATH='{}' HOME=/tmp OPENBLAS_NUM_THREADS=1 AMOR_COMM_TIMEOUT_S=2 "
        // One node, no ssh/rsh: machines without an rsh agent (the GPU machine) need the isolated launcher.
        "OMPI_MCA_plm=isolated "
        "AMOR_DIST_SCENARIO={} OMPI_MCA_orte_abort_on_non_zero_status=0 OMPI_MCA_rmaps_base_oversubscribe=1 "
        "timeout -s KILL 90 mpirun --allow-run-as-root --oversubscribe -np 2 '{}' > '{}' 2>&1",
        path ? path : "/usr/bin:/bin", ld ? ld : "", scenario, exe, log);
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = std::system(cmd.c_str());
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::ifstream in(log);
    const std::string out((std::istreambuf_iterator<char>(in)), {});
    std::remove(log.c_str());
    ASSERT_TRUE(WIFEXITED(rc)) << out;
    EXPECT_NE(WEXITSTATUS(rc), 0) << out;
    EXPECT_NE(WEXITSTATUS(rc), 137) << "killed by the outer timeout:\n" << out;
    EXPECT_LT(took, 40.0) << out;
    EXPECT_NE(out.find("[rank 0] run failed: fsdp: "), std::string::npos) << out;
    EXPECT_NE(out.find("failed on rank 0 of 2: no completion after"), std::string::npos) << out;
    EXPECT_NE(out.find("(AMOR_COMM_TIMEOUT_S=2): a peer rank has died or is stuck"), std::string::npos) << out;
    EXPECT_EQ(out.find("[rank 0] finished all steps"), std::string::npos) << out;
  }
}

}  // namespace
}  // namespace amor::dist

int main(int argc, char** argv) {
  if (const char* s = std::getenv("AMOR_DIST_SCENARIO")) return amor::dist::run_scenario(argc, argv, s);
  return amor::dist::testing::mpi_gtest_main(argc, argv);
}
