package localrun

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Poll polls cond every interval until it holds or timeout passes, and
// tells which: for callers that report the miss themselves. cond runs on
// the caller's goroutine, so it may end the test (t.Fatal); a caller that
// must stop early for another reason holds cond and notes why.
func Poll(timeout, interval time.Duration, cond func() bool) bool {
	return wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}) == nil
}
