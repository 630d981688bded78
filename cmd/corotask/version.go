package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
)

var versionCmd = &command{
	name:       "version",
	summary:    "print the version of corotask",
	help:       `Print the version of this corotask binary and the Go release that built it.`,
	example:    `corotask version`,
	noDatabase: true,
	flags: func(fs *flag.FlagSet) runFunc {
		return func(ctx context.Context, a *app, args []string) error {
			if err := wantArgs(args); err != nil {
				return err
			}
			fmt.Fprintln(a.stdout, versionString())
			return nil
		}
	},
}

// versionString is "corotask VERSION (GO VERSION)": the module version when
// installed with go install, else the VCS revision the binary was built from.
func versionString() string {
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			version = v
		} else {
			var rev, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					if s.Value == "true" {
						modified = "+dirty"
					}
				}
			}
			if rev != "" {
				version = "(devel " + rev[:min(12, len(rev))] + modified + ")"
			}
		}
	}
	return fmt.Sprintf("corotask %s %s", version, runtime.Version())
}
