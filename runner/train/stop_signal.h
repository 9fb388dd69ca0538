// Graceful stop on SIGTERM (Slurm's preemption/time-limit warning) and on a configurable user
// signal (checkpoint.signal: SIGUSR1 or SIGUSR2, e.g. `sbatch --signal=USR1@120`). The handler only
// sets a flag; the training loop agrees on it across the run's ranks at the next step boundary,
// every rank checkpoints that step, and amor-run exits with kRequeueExitCode so a job script can
// requeue (`scontrol requeue`) and the next invocation resumes.
#pragma once
#include <string>

namespace amor {

// Documented in the README: "exit status 75 (EX_TEMPFAIL) = checkpointed and stopped on request".
inline constexpr int kRequeueExitCode = 75;

// Installs the handlers (idempotent). user_signal: "" (none), "SIGUSR1" or "SIGUSR2".
void install_stop_handlers(const std::string& user_signal);
bool stop_requested();
// Which signal asked, for the log ("SIGTERM", "SIGUSR1", ...); "" if none.
std::string stop_signal_name();
void clear_stop_request();  // tests

}  // namespace amor
