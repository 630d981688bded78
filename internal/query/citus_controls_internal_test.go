package query

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ClaimCounted is Claim with its parts for flow controls on Citus in place
// of Claim's own (the quota, the key filter, the choice, the update's
// counted, the last row's flag): a change to the rest of Claim must be
// made to ClaimCounted too, and this fails until it is.
func TestClaimCountedIsClaimWithItsControls(t *testing.T) {
	t.Parallel()
	counted := ClaimCounted
	for _, part := range []struct{ claim, counted string }{
		{claimQuotaPlain, claimQuotaCounted},
		{claimReadyPlain, claimReadyFirst + claimKeyFilterCounted + claimReadyThen + claimKeyFilterCounted + claimReadyEnd},
		{claimPickedPlain, claimPickedCounted},
		{claimUpdate + claimUpdateTail, claimUpdate + "\n        counted = CASE WHEN t.task_type = ANY ($13::text[]) THEN true END," + claimUpdateTail},
	} {
		require.Equal(t, 1, strings.Count(Claim, part.claim), "Claim holds %q once", part.claim)
		require.Equal(t, 1, strings.Count(counted, part.counted), "ClaimCounted holds %q once", part.counted)
		counted = strings.Replace(counted, part.counted, part.claim, 1)
	}
	// The last row's last column: whether a type polled has controls.
	counted, ok := strings.CutSuffix(counted, ", NULL")
	require.True(t, ok)
	require.Equal(t, Claim, counted+",\n    (SELECT 1::smallint FROM gained WHERE yes)")
}
