// Package reap owns the waits for child processes of the bothy executor.
//
// When the executor is PID 1 of a sandbox (or a child subreaper), orphaned
// processes are re-parented to it and must be reaped, which takes a
// wait4(-1) loop. Such a loop steals the exit status of any child waited
// for elsewhere (exec.Cmd.Wait gets ECHILD), so one Reaper owns every wait:
// processes are started through it (Start, StartProcess, StartFunc) and
// their status is handed back on the Proc. Statuses of processes nobody
// started through the Reaper (orphans) are reaped and dropped.
//
// The race where a child exits before its pid is registered is closed by
// holding the registration lock across start and registration: the loop
// that reaped the pid blocks on that lock until the Proc exists.
//
// Without a global loop (the executor is an ordinary process, e.g. in
// tests) each Proc is waited for individually through its pidfd and the
// API is the same.
//
// Packages that start processes inside the executor (bash sessions, file
// tools, plugins) must start them through the executor's Reaper, never with
// exec.Cmd.Wait; this package imports nothing from the executor so any of
// them can depend on it.
package reap
