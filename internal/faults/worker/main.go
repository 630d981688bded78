// Command worker runs one fault-harness worker: a corotask executor with the
// workload of package faults. The harness normally starts workers itself (the
// test binary re-executes itself); this program is for running one by hand:
//
//	go run ./internal/faults/worker -config '{"URL":"postgres://...","Name":"w9","AttemptLog":"/tmp/w9.attempts","HeartbeatTimeout":2000000000}'
//
// The configuration is a faults.WorkerConfig in JSON, from -config or from
// the COROTASK_FAULTS_WORKER environment variable.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/corotask/corotask/internal/faults"
)

func main() {
	cfg := flag.String("config", os.Getenv(faults.WorkerEnv), "worker configuration (JSON faults.WorkerConfig)")
	flag.Parse()
	if *cfg == "" {
		fmt.Fprintln(os.Stderr, "worker: -config or $"+faults.WorkerEnv+" is required")
		os.Exit(2)
	}
	os.Exit(faults.WorkerMain(*cfg))
}
