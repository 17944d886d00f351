package main

// This file is compiled into loombench's own servers and, added with go
// build -overlay, into the loom it measures (see buildLoom): it stands
// alone, the standard library only, and its names are not loom's.

import (
	"bytes"
	"fmt"
	"net/http"
	_ "net/http/pprof" // the heap after a forced GC
	"os"
	"runtime/pprof"
	"sync"
	"syscall"
)

// loombenchDebugAddrEnv names the address a measured server serves its
// debug endpoints on: pprof's, /debug/cpu and /debug/cpuprofile. loom
// serves nothing on http.DefaultServeMux, where they are.
const loombenchDebugAddrEnv = "LOOMBENCH_DEBUG_ADDR"

func init() {
	addr := os.Getenv(loombenchDebugAddrEnv)
	if addr == "" {
		return
	}
	http.HandleFunc("/debug/cpu", loombenchServeCPU)
	http.HandleFunc("POST /debug/cpuprofile/start", loombenchStartProfile)
	http.HandleFunc("POST /debug/cpuprofile/stop", loombenchStopProfile)
	go func() { _ = http.ListenAndServe(addr, nil) }()
}

// loombenchServeCPU answers the process's user plus system CPU time so
// far, in nanoseconds (getrusage: every thread, those ended included).
func loombenchServeCPU(w http.ResponseWriter, _ *http.Request) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintf(w, "%d\n", ru.Utime.Nano()+ru.Stime.Nano())
}

// loombenchProfile is the CPU profile being written, between a start and
// a stop: a phase of the run, however long it turns out.
var loombenchProfile struct {
	sync.Mutex
	buf *bytes.Buffer
}

func loombenchStartProfile(w http.ResponseWriter, _ *http.Request) {
	p := &loombenchProfile
	p.Lock()
	defer p.Unlock()
	if p.buf != nil {
		http.Error(w, "a profile is running", http.StatusConflict)
		return
	}
	buf := new(bytes.Buffer)
	if err := pprof.StartCPUProfile(buf); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	p.buf = buf
}

// loombenchStopProfile answers the profile since the start.
func loombenchStopProfile(w http.ResponseWriter, _ *http.Request) {
	p := &loombenchProfile
	p.Lock()
	defer p.Unlock()
	if p.buf == nil {
		http.Error(w, "no profile is running", http.StatusConflict)
		return
	}
	pprof.StopCPUProfile()
	_, _ = w.Write(p.buf.Bytes())
	p.buf = nil
}
