// Package budget bounds the memory the executor holds at once: Memory for
// what requests in flight hold (JSON bodies, file contents, editor work),
// reserved first and waited for in turn; Output for the process output
// retained across processes, granted in part and never waited for; and a
// Returner that gives memory back to the kernel once a burst is over. Calls
// bounds, beside them, the requests in the file system at once, and with
// them the executor's threads. The server makes one of each and hands them
// to its services.
package budget
