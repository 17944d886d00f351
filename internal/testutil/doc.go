// Package testutil holds the helpers loom's tests share, each defined
// once: LockedBuffer, a log that a server's goroutines write while the test
// reads it, and Eventually and WaitFor, a bounded wait for a condition that
// no signal reports (the kernel reaping a process, a file a sandboxed
// program creates).
//
// Only tests and test-support packages (storetest, toolstest, mcptest)
// import it; production code never does (TestNoProductionImports checks).
package testutil
