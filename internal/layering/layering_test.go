package layering_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/corotask/corotask/"

// allowed lists, for each library package, the packages of the module (but
// internal helpers) it may import.
var allowed = map[string][]string{
	"tasks":     {},
	"inbox":     {"tasks"},
	"heartbeat": {"tasks"},
	"sql":       {"tasks"},
	"executor":  {"heartbeat", "inbox", "sql", "tasks"},
	"schedule":  {"executor", "inbox", "tasks"},
}

// goList runs `go list` with args from the module's root.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go list %v: %s", args, out)
	return strings.Fields(string(out))
}

func TestImportsPointOneWay(t *testing.T) {
	t.Parallel()
	for pkg, may := range allowed {
		for _, imp := range goList(t, "-f", `{{join .Imports " "}}`, "./"+pkg) {
			name, ok := strings.CutPrefix(imp, module)
			if !ok || strings.HasPrefix(name, "internal/") {
				continue
			}
			require.True(t, slices.Contains(may, name), "%s imports %s; it may import %v of the module", pkg, name, may)
		}
	}
}

// A service that runs executors imports neither the web UI's dependencies
// nor OpenTelemetry's.
func TestLibraryPullsInNoUIOrOpenTelemetry(t *testing.T) {
	t.Parallel()
	deps := goList(t, "-deps", "./executor", "./heartbeat", "./inbox", "./sql", "./tasks")
	require.Contains(t, deps, "github.com/jackc/pgx/v5", "the list is the library's dependencies")
	for _, dep := range deps {
		for _, banned := range []string{"go.opentelemetry.io/", "github.com/chromedp/", module + "ui", module + "otelcorotask", module + "cmd/"} {
			require.False(t, strings.HasPrefix(dep, banned), "the library depends on %s", dep)
		}
	}
}
