// Package supervise runs PID 1's children: etcd, kept running by a
// Supervisor, and one-shot commands such as mke2fs and e2fsck, run by Run,
// Output and CombinedOutput. It also reaps orphans.
//
// # Why one reaper owns every wait
//
// As PID 1 (or in a container's PID 1) init inherits every orphaned
// process, and must wait for them or they stay zombies forever. The reaper
// does that: on SIGCHLD it calls wait4(-1, WNOHANG) until nothing is left.
// But wait4(-1) collects any child, including the ones init started itself,
// so exec.Cmd.Wait would race with it: whichever waits first gets the exit
// status, and the other sees ECHILD. So in this process nothing but the
// reaper waits. Start registers each child's pid with the reaper, and the
// reaper hands each exit status to the Process registered for that pid;
// statuses for pids nobody registered are orphans and are only logged.
//
// Registering must not race with reaping either: a child can exit before
// Start has recorded its pid, and Go's fork also waits itself for a child
// whose exec failed. So Start holds the reaper's lock for reading across
// fork, exec and registration, and the reaper holds it for writing while it
// waits. Signals go through the same lock, so a pid is never signalled after
// it was reaped and possibly reused.
//
// The rule for the rest of init: start every child through this package,
// never with exec.Cmd.Run, Output or Wait, which would fail with "no child
// processes" or steal a status.
package supervise
